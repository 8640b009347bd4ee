-- Migration 13: an event a consumer could not handle yet, with its own
-- schedule of attempts, so that the events after it go on meanwhile; once
-- its attempts run out it is parked (parked_at), for staff to retry. The
-- row goes when the consumer has handled the event (its inbox row).
-- +goose Up
CREATE TABLE `outbox_retries` (`consumer` text NOT NULL,`event_id` text NOT NULL,`attempts` integer NOT NULL,`next_attempt_at` datetime NOT NULL,`last_error` text NOT NULL,`parked_at` datetime,PRIMARY KEY (`consumer`,`event_id`));

-- +goose Down
DROP TABLE `outbox_retries`;
