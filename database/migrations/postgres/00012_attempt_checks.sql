-- Migration 12: when a payment attempt waiting for the shopper to
-- authenticate was last asked about at the provider on a read of its order
-- (null: never, as for every attempt made before).
-- +goose Up
ALTER TABLE payment_attempts ADD COLUMN checked_at timestamp with time zone;

-- +goose Down
ALTER TABLE payment_attempts DROP COLUMN checked_at;
