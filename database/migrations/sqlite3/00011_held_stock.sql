-- Migration 11: counts that add up, as shops count (Shopify's available and
-- committed). A product's stock stays what a shopper can buy (available);
-- held is what orders neither paid nor cancelled reserved; on hand, the
-- units the shop has, is their sum. An order's stock_reserved now says its
-- units are held: cleared once, when it is paid (they leave the shop) or
-- cancelled (back on sale). A user counts their orders holding units, which
-- MAX_PENDING_ORDERS caps.
-- The last release's rows are upgraded in place: its stock was already what
-- was left to buy, so held is the units of its live unpaid orders, and on
-- hand becomes stock + held.
-- +goose Up
ALTER TABLE products ADD COLUMN `held` integer NOT NULL DEFAULT 0;
UPDATE orders SET stock_reserved = false WHERE status <> 'pending';
UPDATE products SET held = (SELECT COALESCE(SUM(i.quantity), 0) FROM order_items i JOIN orders o ON o.id = i.order_id
  WHERE i.product_id = products.id AND o.stock_reserved);
ALTER TABLE users ADD COLUMN `pending_orders` integer NOT NULL DEFAULT 0;
UPDATE users SET pending_orders = (SELECT COUNT(*) FROM orders o WHERE o.user_id = users.id AND o.stock_reserved);

-- +goose Down
ALTER TABLE users DROP COLUMN pending_orders;
ALTER TABLE products DROP COLUMN held;
