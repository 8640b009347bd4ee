-- Migration 5: who may give money back. A user is a shopper or staff
-- (made so by `shop staff add EMAIL`, never on the web); a refund records
-- who gave it (null on the rows made before it was recorded); a shopper
-- asks for a refund with a request, which staff fulfil or decline; an order
-- has at most one request open.
-- +goose Up
ALTER TABLE `users` ADD COLUMN `role` text NOT NULL DEFAULT 'shopper' CHECK (`role` IN ('shopper','staff'));
ALTER TABLE `refunds` ADD COLUMN `created_by` text;
CREATE TABLE `refund_requests` (`id` text,`order_id` text NOT NULL,`user_id` text NOT NULL,`reason` text NOT NULL DEFAULT '',`state` text NOT NULL CHECK (`state` IN ('requested','fulfilled','declined')),`refund_id` text,`created_at` datetime NOT NULL,PRIMARY KEY (`id`),CONSTRAINT `fk_orders_refund_requests` FOREIGN KEY (`order_id`) REFERENCES `orders`(`id`) ON DELETE CASCADE);
CREATE INDEX `idx_refund_requests_order_id` ON `refund_requests`(`order_id`);
CREATE UNIQUE INDEX `idx_refund_requests_open` ON `refund_requests`(`order_id`) WHERE `state` = 'requested';

-- +goose Down
DROP TABLE `refund_requests`;
ALTER TABLE `refunds` DROP COLUMN `created_by`;
ALTER TABLE `users` DROP COLUMN `role`;
