-- Migration 16: replay counts in rows of their own. Each instance adds the
-- replays it answered to their keys every second; written into the key's
-- row, each count rewrote the stored answer beside it, and a storm of
-- replays spent over a quarter of an instance's CPU there. A count is now a
-- narrow row per key, for the key's operation (a row of an earlier
-- operation counts for nothing). The keys' replays column keeps what the
-- last release counted, and a listing adds the two; the last release, still
-- running beside this one, goes on counting there.
-- +goose Up
CREATE TABLE idempotency_replays (
    key_id integer PRIMARY KEY REFERENCES idempotency_keys (id) ON DELETE CASCADE,
    operation_id varchar(36) NOT NULL,
    n bigint NOT NULL
);

-- +goose Down
-- The counts go back into the keys' own column, which the release before
-- this one counts in and lists; those of a key's earlier operation count
-- for nothing, as above.
UPDATE idempotency_keys SET replays = replays + (SELECT r.n FROM idempotency_replays r
    WHERE r.key_id = idempotency_keys.id AND r.operation_id = idempotency_keys.operation_id)
WHERE EXISTS (SELECT 1 FROM idempotency_replays r
    WHERE r.key_id = idempotency_keys.id AND r.operation_id = idempotency_keys.operation_id);
DROP TABLE idempotency_replays;
