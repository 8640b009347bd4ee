-- Migration 9: one lease per outbox consumer. Every instance runs the
-- relay; the instance holding a consumer's lease, until it lapses, is the
-- one that hands that consumer its events, so that a receipt is not sent
-- by two instances at once.
-- +goose Up
CREATE TABLE `outbox_leases` (`consumer` text NOT NULL PRIMARY KEY,`holder` text NOT NULL,`held_until` datetime NOT NULL);

-- +goose Down
DROP TABLE `outbox_leases`;
