-- Migration 15: a hot product's stock over several rows. A flash sale's
-- orders all reserve the same product, and PostgreSQL locks its row from
-- the reservation to COMMIT: one at a time. An operator may split the
-- product (`shop stock split SKU N`): its units for sale then lie over N
-- slots, slot 0 the product's own row and slots 1 to N-1 rows of
-- stock_slots, and each order reserves from one of them. A product's stock
-- and held are the sums over its product row and its slots. An order's line
-- names the slot that holds its units, to give them back there.
-- The last release's products have one slot, their own row, as before.
-- +goose Up
ALTER TABLE products ADD COLUMN stock_slots integer DEFAULT 1 NOT NULL
  CONSTRAINT chk_products_stock_slots CHECK (stock_slots BETWEEN 1 AND 64);
ALTER TABLE order_items ADD COLUMN slot integer DEFAULT 0 NOT NULL;
CREATE TABLE stock_slots (
    product_id varchar(36) NOT NULL REFERENCES products (id),
    slot integer NOT NULL,
    stock integer DEFAULT 0 NOT NULL CONSTRAINT chk_stock_slots_stock CHECK (stock >= 0),
    held integer DEFAULT 0 NOT NULL,
    PRIMARY KEY (product_id, slot)
);

-- +goose Down
DROP TABLE stock_slots;
ALTER TABLE order_items DROP COLUMN slot;
ALTER TABLE products DROP COLUMN stock_slots;
