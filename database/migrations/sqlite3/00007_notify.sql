-- Migration 7: what the consumers of the outbox did. A receipt is one email
-- sent for one event; a webhook delivery is one event owed to the
-- merchant's endpoint, and its attempts are every POST made for it.
-- +goose Up
CREATE TABLE `receipts` (`event_id` text PRIMARY KEY,`order_id` text NOT NULL,`message_id` text NOT NULL,`recipient` text NOT NULL,`sent_at` datetime NOT NULL);
CREATE TABLE `webhook_deliveries` (`id` text PRIMARY KEY,`event_type` text NOT NULL,`order_id` text NOT NULL,`body` text NOT NULL,`state` text NOT NULL,`attempts` integer NOT NULL DEFAULT 0,`next_attempt_at` datetime NOT NULL,`claimed_by` text,`claimed_until` datetime,`created_at` datetime NOT NULL,`finished_at` datetime);
CREATE INDEX `idx_webhook_deliveries_due` ON `webhook_deliveries`(`state`,`next_attempt_at`);
CREATE INDEX `idx_webhook_deliveries_created` ON `webhook_deliveries`(`created_at`,`id`);
CREATE TABLE `webhook_attempts` (`id` integer PRIMARY KEY AUTOINCREMENT,`delivery_id` text NOT NULL,`attempted_at` datetime NOT NULL,`status_code` integer NOT NULL,`error` text NOT NULL);
CREATE INDEX `idx_webhook_attempts_delivery` ON `webhook_attempts`(`delivery_id`);

-- +goose Down
DROP TABLE `webhook_attempts`;
DROP TABLE `webhook_deliveries`;
DROP TABLE `receipts`;
