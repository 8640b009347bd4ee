-- Migration 13: an event a consumer could not handle yet, with its own
-- schedule of attempts, so that the events after it go on meanwhile; once
-- its attempts run out it is parked (parked_at), for staff to retry. The
-- row goes when the consumer has handled the event (its inbox row).
-- +goose Up
CREATE TABLE outbox_retries (
    consumer character varying(40) NOT NULL,
    event_id character varying(100) NOT NULL,
    attempts integer NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    last_error text NOT NULL,
    parked_at timestamp with time zone,
    PRIMARY KEY (consumer, event_id)
);

-- +goose Down
DROP TABLE outbox_retries;
