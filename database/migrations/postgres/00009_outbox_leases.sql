-- Migration 9: one lease per outbox consumer. Every instance runs the
-- relay; the instance holding a consumer's lease, until it lapses, is the
-- one that hands that consumer its events, so that a receipt is not sent
-- by two instances at once.
-- +goose Up
CREATE TABLE outbox_leases (
    consumer character varying(40) PRIMARY KEY,
    holder character varying(100) NOT NULL,
    held_until timestamp with time zone NOT NULL
);

-- +goose Down
DROP TABLE outbox_leases;
