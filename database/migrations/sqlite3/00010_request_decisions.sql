-- Migration 10: a refund request's answer when staff decline it: who
-- declined it, when, and why (null and empty on the requests answered
-- before it was recorded, and on those still open or fulfilled).
-- +goose Up
ALTER TABLE `refund_requests` ADD COLUMN `decided_by` text;
ALTER TABLE `refund_requests` ADD COLUMN `decided_at` datetime;
ALTER TABLE `refund_requests` ADD COLUMN `decline_reason` text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE `refund_requests` DROP COLUMN `decline_reason`;
ALTER TABLE `refund_requests` DROP COLUMN `decided_at`;
ALTER TABLE `refund_requests` DROP COLUMN `decided_by`;
