-- Migration 4: what a payment attempt that requires action (3-D Secure)
-- asks of the shopper: where to authenticate, and until when; the order's
-- hold lasts as long.
-- +goose Up
CREATE TABLE `payment_actions` (`provider_key` text,`url` text NOT NULL,`expires_at` datetime NOT NULL,PRIMARY KEY (`provider_key`));

-- +goose Down
DROP TABLE `payment_actions`;
