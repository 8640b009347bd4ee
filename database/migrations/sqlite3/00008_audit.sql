-- Migration 8: the audit trail. Every money movement and every act of a
-- shopper or of staff writes one entry, in the act's own transaction: who
-- acted (a user, or the reconciler, a provider's webhook, the expiry sweep,
-- the shopper's return from an authentication), on which order and row,
-- for how much, why, and when. order_id is null for an act on no order (a
-- restock). Entries are only ever added.
-- +goose Up
CREATE TABLE `audit_entries` (`id` integer PRIMARY KEY AUTOINCREMENT,`order_id` text,`action` text NOT NULL,`actor_kind` text NOT NULL CHECK (`actor_kind` IN ('staff','shopper','reconciler','webhook','expiry','provider_return')),`actor_id` text,`subject_id` text,`amount_cents` integer,`reason` text NOT NULL DEFAULT '',`at` datetime NOT NULL);
CREATE INDEX `idx_audit_entries_order_id` ON `audit_entries`(`order_id`);
CREATE INDEX `idx_audit_entries_subject_id` ON `audit_entries`(`subject_id`);

-- +goose Down
DROP TABLE `audit_entries`;
