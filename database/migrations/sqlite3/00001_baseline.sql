-- Migration 1: the schema of the release before versioned migrations, as
-- its AutoMigrate made it on SQLite. IF NOT EXISTS: on a database that release
-- made, this changes nothing and only records version 1.
-- +goose Up
CREATE TABLE IF NOT EXISTS `users` (`id` text,`email` text NOT NULL,`password_hash` text NOT NULL,`created_at` datetime NOT NULL,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX IF NOT EXISTS `idx_users_email` ON `users`(`email`);
CREATE TABLE IF NOT EXISTS `api_tokens` (`id` integer PRIMARY KEY AUTOINCREMENT,`user_id` text NOT NULL,`token_hash` text NOT NULL,`created_at` datetime NOT NULL,`expires_at` datetime,`revoked_at` datetime);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_api_tokens_token_hash` ON `api_tokens`(`token_hash`);
CREATE INDEX IF NOT EXISTS `idx_api_tokens_user_id` ON `api_tokens`(`user_id`);
CREATE TABLE IF NOT EXISTS `products` (`id` text,`sku` text NOT NULL,`name` text NOT NULL,`price_cents` integer NOT NULL,`currency` text NOT NULL,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX IF NOT EXISTS `idx_products_sku` ON `products`(`sku`);
CREATE TABLE IF NOT EXISTS `orders` (`id` text,`number` integer,`user_id` text NOT NULL,`status` text NOT NULL,`currency` text NOT NULL,`total_cents` integer NOT NULL,`derived_key` text NOT NULL,`refunded_cents` integer NOT NULL DEFAULT 0,`held_by` text,`held_until` datetime,`created_at` datetime NOT NULL,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX IF NOT EXISTS `idx_orders_derived_key` ON `orders`(`derived_key`);
CREATE INDEX IF NOT EXISTS `idx_orders_user_created` ON `orders`(`user_id`,`created_at`);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_orders_number` ON `orders`(`number`);
CREATE TABLE IF NOT EXISTS `order_items` (`id` integer PRIMARY KEY AUTOINCREMENT,`order_id` text NOT NULL,`product_id` text NOT NULL,`sku` text NOT NULL,`name` text NOT NULL,`unit_price_cents` integer NOT NULL,`quantity` integer NOT NULL,CONSTRAINT `fk_orders_items` FOREIGN KEY (`order_id`) REFERENCES `orders`(`id`) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS `idx_order_items_order_id` ON `order_items`(`order_id`);
CREATE TABLE IF NOT EXISTS `payments` (`id` text,`order_id` text NOT NULL,`status` text NOT NULL,`amount_cents` integer NOT NULL,`currency` text NOT NULL,`payment_method` text NOT NULL,`decline_reason` text,`provider_charge_id` text NOT NULL,`provider_key` text NOT NULL,`created_at` datetime NOT NULL,PRIMARY KEY (`id`),CONSTRAINT `fk_orders_payments` FOREIGN KEY (`order_id`) REFERENCES `orders`(`id`) ON DELETE CASCADE);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_payments_provider_key` ON `payments`(`provider_key`);
CREATE INDEX IF NOT EXISTS `idx_payments_order_id` ON `payments`(`order_id`);
CREATE TABLE IF NOT EXISTS `payment_attempts` (`id` text,`order_id` text NOT NULL,`derived_key` text NOT NULL,`provider_key` text NOT NULL,`state` text NOT NULL,`sent_at` datetime,`created_at` datetime NOT NULL,`updated_at` datetime NOT NULL,`amount_cents` integer NOT NULL,`currency` text NOT NULL,`payment_method` text NOT NULL,`provider_charge_id` text,`decline_reason` text,PRIMARY KEY (`id`),CONSTRAINT `fk_orders_attempts` FOREIGN KEY (`order_id`) REFERENCES `orders`(`id`) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS `idx_payment_attempts_state` ON `payment_attempts`(`state`);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_payment_attempts_provider_key` ON `payment_attempts`(`provider_key`);
CREATE INDEX IF NOT EXISTS `idx_payment_attempts_derived_key` ON `payment_attempts`(`derived_key`);
CREATE INDEX IF NOT EXISTS `idx_payment_attempts_order_id` ON `payment_attempts`(`order_id`);
CREATE TABLE IF NOT EXISTS `refunds` (`id` text,`order_id` text NOT NULL,`derived_key` text NOT NULL,`provider_key` text NOT NULL,`state` text NOT NULL,`sent_at` datetime,`created_at` datetime NOT NULL,`updated_at` datetime NOT NULL,`payment_id` text NOT NULL,`charge_id` text NOT NULL,`amount_cents` integer NOT NULL,`currency` text NOT NULL,`reason` text,`provider_refund_id` text,`failure_reason` text,PRIMARY KEY (`id`),CONSTRAINT `fk_orders_refunds` FOREIGN KEY (`order_id`) REFERENCES `orders`(`id`) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS `idx_refunds_state` ON `refunds`(`state`);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_refunds_provider_key` ON `refunds`(`provider_key`);
CREATE INDEX IF NOT EXISTS `idx_refunds_derived_key` ON `refunds`(`derived_key`);
CREATE INDEX IF NOT EXISTS `idx_refunds_order_id` ON `refunds`(`order_id`);
CREATE TABLE IF NOT EXISTS `idempotency_keys` (`id` integer PRIMARY KEY AUTOINCREMENT,`scope` text NOT NULL,`key` text NOT NULL,`operation_id` text NOT NULL,`method` text NOT NULL,`route` text NOT NULL,`fingerprint` text NOT NULL,`raw_digest` blob,`target` text NOT NULL DEFAULT "",`state` text NOT NULL,`owner_token` text NOT NULL,`locked_until` datetime NOT NULL,`status` integer NOT NULL DEFAULT 0,`headers` text,`body` blob,`replays` integer NOT NULL DEFAULT 0,`created_at` datetime NOT NULL,`expires_at` datetime NOT NULL);
CREATE INDEX IF NOT EXISTS `idx_idempotency_keys_expires_at` ON `idempotency_keys`(`expires_at`);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_idempotency_scope_key` ON `idempotency_keys`(`scope`,`key`);
CREATE TABLE IF NOT EXISTS `simulated_charges` (`id` text,`idempotency_key` text NOT NULL,`amount_cents` integer NOT NULL,`currency` text NOT NULL,`payment_method` text NOT NULL,`status` text NOT NULL,`decline_reason` text,`created_at` datetime NOT NULL,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX IF NOT EXISTS `idx_simulated_charges_idempotency_key` ON `simulated_charges`(`idempotency_key`);
CREATE TABLE IF NOT EXISTS `simulated_refunds` (`id` text,`idempotency_key` text NOT NULL,`charge_id` text NOT NULL,`amount_cents` integer NOT NULL,`currency` text NOT NULL,`status` text NOT NULL,`failure_reason` text,`created_at` datetime NOT NULL,PRIMARY KEY (`id`));
CREATE INDEX IF NOT EXISTS `idx_simulated_refunds_charge_id` ON `simulated_refunds`(`charge_id`);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_simulated_refunds_idempotency_key` ON `simulated_refunds`(`idempotency_key`);
CREATE TABLE IF NOT EXISTS `login_failures` (`id` integer PRIMARY KEY AUTOINCREMENT,`email` text NOT NULL,`address` text NOT NULL DEFAULT "",`at` datetime NOT NULL);
CREATE INDEX IF NOT EXISTS `idx_login_failures_at` ON `login_failures`(`at`);
CREATE INDEX IF NOT EXISTS `idx_login_failures_account_from` ON `login_failures`(`email`,`address`,`at`);
CREATE TABLE IF NOT EXISTS `address_minutes` (`address` text,`minute` integer,`hits` integer NOT NULL,PRIMARY KEY (`address`,`minute`));
CREATE INDEX IF NOT EXISTS `idx_address_minutes_minute` ON `address_minutes`(`minute`);
