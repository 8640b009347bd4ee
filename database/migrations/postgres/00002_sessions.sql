-- Migration 2: browser sessions kept on the server, so that logging out, a
-- password change or a long idle time ends them. Only the SHA-256 of a
-- session's random token is stored: a leaked table signs no one in.
-- +goose Up
CREATE TABLE sessions (
    id bigserial PRIMARY KEY,
    token_hash character varying(64) NOT NULL,
    user_id character varying(36) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT fk_sessions_user FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX idx_sessions_token_hash ON sessions (token_hash);
CREATE INDEX idx_sessions_user_id ON sessions (user_id);

-- +goose Down
DROP TABLE sessions;
