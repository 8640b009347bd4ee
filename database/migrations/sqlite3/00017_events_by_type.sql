-- Migration 17: a consumer's events, found by their types. The outbox
-- relay's look for a consumer of some types only (receipts: an order paid
-- or refunded) read every event to keep those of its types; on SQLite a
-- look starts past what the consumer has settled, but a recheck starts at
-- the first event (docs/architecture.md).
-- +goose Up
CREATE INDEX `idx_events_type_seq` ON `events` (`type`, `seq`);

-- +goose Down
DROP INDEX `idx_events_type_seq`;
