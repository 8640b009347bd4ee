-- Migration 6: the outbox and the consumers' inbox. Each business fact
-- writes one event in its own transaction; its id is derived from the
-- fact's row, so a re-run cannot write a second. A consumer records each
-- event it has acted on in the inbox, in the transaction of its own effect.
-- +goose Up
CREATE TABLE events (
    seq bigserial PRIMARY KEY,
    id character varying(100) NOT NULL,
    type character varying(40) NOT NULL,
    order_id character varying(36) NOT NULL,
    body text NOT NULL,
    created_at timestamp with time zone NOT NULL
);
CREATE UNIQUE INDEX idx_events_id ON events (id);
CREATE INDEX idx_events_order_id ON events (order_id);
CREATE TABLE inbox (
    consumer character varying(40) NOT NULL,
    event_id character varying(100) NOT NULL,
    processed_at timestamp with time zone NOT NULL,
    PRIMARY KEY (consumer, event_id)
);

-- +goose Down
DROP TABLE inbox;
DROP TABLE events;
