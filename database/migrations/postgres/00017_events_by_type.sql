-- Migration 17: a consumer's events, found by their types. The outbox
-- relay's look for a consumer of some types only (receipts: an order paid
-- or refunded) read every event on PostgreSQL, whose looks start at the
-- first event (docs/architecture.md), to keep those of its types: a scan
-- of the whole table, up to twenty times a second under load. Building the
-- index holds off writes to events (new orders) while it reads them once.
-- +goose Up
CREATE INDEX idx_events_type_seq ON events (type, seq);

-- +goose Down
DROP INDEX idx_events_type_seq;
