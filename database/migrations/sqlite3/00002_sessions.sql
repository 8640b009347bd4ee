-- Migration 2: browser sessions kept on the server, so that logging out, a
-- password change or a long idle time ends them. Only the SHA-256 of a
-- session's random token is stored: a leaked table signs no one in.
-- +goose Up
CREATE TABLE `sessions` (`id` integer PRIMARY KEY AUTOINCREMENT,`token_hash` text NOT NULL,`user_id` text NOT NULL,`created_at` datetime NOT NULL,`last_seen_at` datetime NOT NULL,`expires_at` datetime NOT NULL,CONSTRAINT `fk_sessions_user` FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON DELETE CASCADE);
CREATE UNIQUE INDEX `idx_sessions_token_hash` ON `sessions`(`token_hash`);
CREATE INDEX `idx_sessions_user_id` ON `sessions`(`user_id`);

-- +goose Down
DROP TABLE `sessions`;
