-- Migration 3: stock. A product counts the units it has now, never below 0.
-- An order says why it was cancelled, and when its units came back to stock:
-- set once, by the statement that returns them, so they come back once.
-- The last release sold without counting: its products start with 10000
-- units each, until staff set the real count (`shop stock set SKU N`).
-- An order says whether it took its units from stock: the last release's
-- orders never did, so cancelling or expiring one gives nothing back (nor
-- does an order an instance of the last release places during a rolling
-- upgrade).
-- +goose Up
ALTER TABLE products ADD COLUMN stock bigint DEFAULT 0 NOT NULL CONSTRAINT chk_products_stock CHECK (stock >= 0);
UPDATE products SET stock = 10000;
ALTER TABLE orders ADD COLUMN cancel_reason character varying(24) DEFAULT '' NOT NULL;
ALTER TABLE orders ADD COLUMN restocked_at timestamp with time zone;
ALTER TABLE orders ADD COLUMN stock_reserved boolean DEFAULT false NOT NULL;
