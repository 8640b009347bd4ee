-- Migration 14: the orders a run holds, found by its name alone: the
-- idempotency middleware's heartbeat extends a payment's hold on its order
-- with the key's lease, knowing the run but not the order. Only held orders
-- are indexed.
-- +goose Up
CREATE INDEX `idx_orders_held_by` ON `orders` (`held_by`) WHERE `held_by` IS NOT NULL;

-- +goose Down
DROP INDEX `idx_orders_held_by`;
