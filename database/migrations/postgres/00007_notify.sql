-- Migration 7: what the consumers of the outbox did. A receipt is one email
-- sent for one event; a webhook delivery is one event owed to the
-- merchant's endpoint, and its attempts are every POST made for it.
-- +goose Up
CREATE TABLE receipts (
    event_id character varying(100) PRIMARY KEY,
    order_id character varying(36) NOT NULL,
    message_id character varying(200) NOT NULL,
    recipient character varying(254) NOT NULL,
    sent_at timestamp with time zone NOT NULL
);
CREATE TABLE webhook_deliveries (
    id character varying(100) PRIMARY KEY,
    event_type character varying(40) NOT NULL,
    order_id character varying(36) NOT NULL,
    body text NOT NULL,
    state character varying(16) NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamp with time zone NOT NULL,
    claimed_by character varying(40),
    claimed_until timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone
);
CREATE INDEX idx_webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
CREATE INDEX idx_webhook_deliveries_created ON webhook_deliveries (created_at, id);
CREATE TABLE webhook_attempts (
    id bigserial PRIMARY KEY,
    delivery_id character varying(100) NOT NULL,
    attempted_at timestamp with time zone NOT NULL,
    status_code integer NOT NULL,
    error text NOT NULL
);
CREATE INDEX idx_webhook_attempts_delivery ON webhook_attempts (delivery_id);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE receipts;
