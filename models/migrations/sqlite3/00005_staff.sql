-- Migration 5: who may give money back. A user is a shopper or staff
-- (made so by `shop staff add EMAIL`, never on the web); a refund records
-- who gave it (null on the rows made before it was recorded).
-- +goose Up
ALTER TABLE `users` ADD COLUMN `role` text NOT NULL DEFAULT 'shopper' CHECK (`role` IN ('shopper','staff'));
ALTER TABLE `refunds` ADD COLUMN `created_by` text;

-- +goose Down
ALTER TABLE `refunds` DROP COLUMN `created_by`;
ALTER TABLE `users` DROP COLUMN `role`;
