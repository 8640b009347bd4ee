-- Migration 4: what a payment attempt that requires action (3-D Secure)
-- asks of the shopper: where to authenticate, and until when; the order's
-- hold lasts as long.
-- +goose Up
CREATE TABLE payment_actions (
    provider_key character varying(90) PRIMARY KEY,
    url character varying(2048) NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

-- +goose Down
DROP TABLE payment_actions;
