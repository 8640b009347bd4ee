-- Migration 1: the schema of the release before versioned migrations, as
-- its AutoMigrate made it on PostgreSQL. IF NOT EXISTS: on a database that
-- release made, this changes nothing and only records version 1.
-- +goose Up
CREATE TABLE IF NOT EXISTS users (
    id character varying(36) PRIMARY KEY,
    email character varying(254) NOT NULL,
    password_hash character varying(100) NOT NULL,
    created_at timestamp with time zone NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_users_email ON users (email);

CREATE TABLE IF NOT EXISTS api_tokens (
    id bigserial PRIMARY KEY,
    user_id character varying(36) NOT NULL,
    token_hash character varying(64) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_api_tokens_token_hash ON api_tokens (token_hash);
CREATE INDEX IF NOT EXISTS idx_api_tokens_user_id ON api_tokens (user_id);

CREATE TABLE IF NOT EXISTS products (
    id character varying(36) PRIMARY KEY,
    sku character varying(64) NOT NULL,
    name character varying(200) NOT NULL,
    price_cents bigint NOT NULL,
    currency character varying(3) NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_products_sku ON products (sku);

-- Order numbers start at models.FirstOrderNumber.
CREATE SEQUENCE IF NOT EXISTS order_numbers START WITH 1001;

CREATE TABLE IF NOT EXISTS orders (
    id character varying(36) PRIMARY KEY,
    number bigint,
    user_id character varying(36) NOT NULL,
    status character varying(24) NOT NULL,
    currency character varying(3) NOT NULL,
    total_cents bigint NOT NULL,
    derived_key character varying(80) NOT NULL,
    refunded_cents bigint DEFAULT 0 NOT NULL,
    held_by character varying(100),
    held_until timestamp with time zone,
    created_at timestamp with time zone NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_orders_derived_key ON orders (derived_key);
CREATE UNIQUE INDEX IF NOT EXISTS idx_orders_number ON orders (number);
CREATE INDEX IF NOT EXISTS idx_orders_user_created ON orders (user_id, created_at);

CREATE TABLE IF NOT EXISTS order_items (
    id bigserial PRIMARY KEY,
    order_id character varying(36) NOT NULL,
    product_id character varying(36) NOT NULL,
    sku character varying(64) NOT NULL,
    name character varying(200) NOT NULL,
    unit_price_cents bigint NOT NULL,
    quantity bigint NOT NULL,
    CONSTRAINT fk_orders_items FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_order_items_order_id ON order_items (order_id);

CREATE TABLE IF NOT EXISTS payments (
    id character varying(36) PRIMARY KEY,
    order_id character varying(36) NOT NULL,
    status character varying(16) NOT NULL,
    amount_cents bigint NOT NULL,
    currency character varying(3) NOT NULL,
    payment_method character varying(64) NOT NULL,
    decline_reason character varying(200),
    provider_charge_id character varying(64) NOT NULL,
    provider_key character varying(90) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT fk_orders_payments FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_payments_order_id ON payments (order_id);
CREATE UNIQUE INDEX IF NOT EXISTS idx_payments_provider_key ON payments (provider_key);

CREATE TABLE IF NOT EXISTS payment_attempts (
    id character varying(36) PRIMARY KEY,
    order_id character varying(36) NOT NULL,
    derived_key character varying(80) NOT NULL,
    provider_key character varying(90) NOT NULL,
    state character varying(16) NOT NULL,
    sent_at timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    amount_cents bigint NOT NULL,
    currency character varying(3) NOT NULL,
    payment_method character varying(64) NOT NULL,
    provider_charge_id character varying(64),
    decline_reason character varying(200),
    CONSTRAINT fk_orders_attempts FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_payment_attempts_derived_key ON payment_attempts (derived_key);
CREATE INDEX IF NOT EXISTS idx_payment_attempts_order_id ON payment_attempts (order_id);
CREATE UNIQUE INDEX IF NOT EXISTS idx_payment_attempts_provider_key ON payment_attempts (provider_key);
CREATE INDEX IF NOT EXISTS idx_payment_attempts_state ON payment_attempts (state);

CREATE TABLE IF NOT EXISTS refunds (
    id character varying(36) PRIMARY KEY,
    order_id character varying(36) NOT NULL,
    derived_key character varying(80) NOT NULL,
    provider_key character varying(90) NOT NULL,
    state character varying(16) NOT NULL,
    sent_at timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    payment_id character varying(36) NOT NULL,
    charge_id character varying(64) NOT NULL,
    amount_cents bigint NOT NULL,
    currency character varying(3) NOT NULL,
    reason character varying(200),
    provider_refund_id character varying(64),
    failure_reason character varying(200),
    CONSTRAINT fk_orders_refunds FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_refunds_derived_key ON refunds (derived_key);
CREATE INDEX IF NOT EXISTS idx_refunds_order_id ON refunds (order_id);
CREATE UNIQUE INDEX IF NOT EXISTS idx_refunds_provider_key ON refunds (provider_key);
CREATE INDEX IF NOT EXISTS idx_refunds_state ON refunds (state);

-- The idempotency middleware's table (middleware.IdempotencyKey).
CREATE TABLE IF NOT EXISTS idempotency_keys (
    id bigserial PRIMARY KEY,
    scope character varying(64) NOT NULL,
    key character varying(255) NOT NULL,
    operation_id character varying(36) NOT NULL,
    method character varying(10) NOT NULL,
    route character varying(255) NOT NULL,
    fingerprint character varying(64) NOT NULL,
    raw_digest bytea,
    target character varying(64) DEFAULT ''::character varying NOT NULL,
    state character varying(16) NOT NULL,
    owner_token character varying(36) NOT NULL,
    locked_until timestamp with time zone NOT NULL,
    status bigint DEFAULT 0 NOT NULL,
    headers text,
    body bytea,
    replays bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_idempotency_keys_expires_at ON idempotency_keys (expires_at);
CREATE UNIQUE INDEX IF NOT EXISTS idx_idempotency_scope_key ON idempotency_keys (scope, key);

-- The simulated payment provider's tables (payments.Simulated).
CREATE TABLE IF NOT EXISTS simulated_charges (
    id character varying(40) PRIMARY KEY,
    idempotency_key character varying(255) NOT NULL,
    amount_cents bigint NOT NULL,
    currency character varying(3) NOT NULL,
    payment_method character varying(64) NOT NULL,
    status character varying(16) NOT NULL,
    decline_reason character varying(200),
    created_at timestamp with time zone NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_simulated_charges_idempotency_key ON simulated_charges (idempotency_key);

CREATE TABLE IF NOT EXISTS simulated_refunds (
    id character varying(40) PRIMARY KEY,
    idempotency_key character varying(255) NOT NULL,
    charge_id character varying(40) NOT NULL,
    amount_cents bigint NOT NULL,
    currency character varying(3) NOT NULL,
    status character varying(16) NOT NULL,
    failure_reason character varying(200),
    created_at timestamp with time zone NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_simulated_refunds_charge_id ON simulated_refunds (charge_id);
CREATE UNIQUE INDEX IF NOT EXISTS idx_simulated_refunds_idempotency_key ON simulated_refunds (idempotency_key);

CREATE TABLE IF NOT EXISTS login_failures (
    id bigserial PRIMARY KEY,
    email character varying(254) NOT NULL,
    address character varying(64) DEFAULT ''::character varying NOT NULL,
    at timestamp with time zone NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_login_failures_account_from ON login_failures (email, address, at);
CREATE INDEX IF NOT EXISTS idx_login_failures_at ON login_failures (at);

CREATE TABLE IF NOT EXISTS address_minutes (
    address character varying(64),
    minute bigint,
    hits bigint NOT NULL,
    PRIMARY KEY (address, minute)
);
CREATE INDEX IF NOT EXISTS idx_address_minutes_minute ON address_minutes (minute);
