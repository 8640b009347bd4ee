// Package config reads the shop's settings from the environment, once, from one table.
package config

import (
	"log/slog"
	"time"

	"github.com/shop/shop/middleware"
)

// Config is the table of settings: each field's env tag is its name,
// envDefault its default, doc its one-line description; min and max bound a
// number, oneof and is (a key of formats) a string, and want is what the
// error says a bad value should be. .env.example lists every one.
type Config struct {
	Host        string `env:"HOST" is:"ip" want:"an IP address to listen on, such as 127.0.0.1, or empty for every interface" doc:"The address to listen on: empty for every interface, 127.0.0.1 for this machine only."`
	Port        int    `env:"PORT" envDefault:"8080" max:"65535" want:"a port number 0–65535" doc:"TCP port the server listens on (0 picks a free port)."`
	DatabaseURL string `env:"DATABASE_URL" envDefault:"data/shop.db" doc:"A SQLite file, or postgres://… for PostgreSQL, which many instances may share."`

	IdempotencyTTL        time.Duration `env:"IDEMPOTENCY_TTL" envDefault:"24h" doc:"How long a key and its stored answer are remembered; at least 5 × IDEMPOTENCY_LEASE."`
	IdempotencyLease      time.Duration `env:"IDEMPOTENCY_LEASE" envDefault:"30s" min:"1" doc:"How long an attempt owns a key before a retry may take over; an attempt runs at most 4 leases."`
	IdempotencyWait       time.Duration `env:"IDEMPOTENCY_WAIT" envDefault:"5s" doc:"How long a duplicate waits for its original before answering 409."`
	IdempotencyCacheBytes int64         `env:"IDEMPOTENCY_CACHE_BYTES" envDefault:"67108864" want:"a whole number of bytes, 0 for no cache, such as 67108864 (64 MiB)" doc:"Memory each instance keeps completed answers in; 0 turns the cache off."`

	TokenTTL time.Duration `env:"TOKEN_TTL" envDefault:"720h" doc:"How long a bearer token stays valid."`
	// TokenCacheTTL: seconds of a revoked token working elsewhere are harmless, and spare a busy client's reads.
	TokenCacheTTL time.Duration `env:"TOKEN_CACHE_TTL" envDefault:"5s" doc:"How long an instance trusts a bearer-token lookup (at most 1m); 0 turns the cache off."`

	PaymentProvider     string        `env:"PAYMENT_PROVIDER" envDefault:"simulated" oneof:"simulated stripe" doc:"The payment provider: simulated (built in) or stripe."`
	PaymentLatency      time.Duration `env:"PAYMENT_LATENCY" envDefault:"50ms" doc:"Delay added to each call of the simulated provider."`
	AuthExpiry          time.Duration `env:"PAYMENT_AUTH_EXPIRY" envDefault:"15m" min:"1" doc:"How long a payment waiting for the shopper to authenticate (3-D Secure) holds its order."`
	AuthPoll            time.Duration `env:"PAYMENT_AUTH_POLL" envDefault:"5s" min:"1" doc:"How often, at most, reading an order asks the provider about its payment waiting for the shopper to authenticate."`
	PublicURL           string        `env:"PUBLIC_URL" is:"http" want:"the shop's address, such as https://shop.example.com" doc:"The shop's address as shoppers reach it, where a card provider sends them back; http://localhost:PORT when empty."`
	StripeSecretKey     string        `env:"STRIPE_SECRET_KEY" doc:"Stripe's secret key, required with PAYMENT_PROVIDER=stripe; a live key only with SHOP_ENV=production."`
	StripeAPIBase       string        `env:"STRIPE_API_BASE" is:"http" want:"a URL such as http://127.0.0.1:12111 (stripe-mock)" doc:"Where Stripe's API is: empty for api.stripe.com, or a stripe-mock's URL."`
	StripeWebhookSecret string        `env:"STRIPE_WEBHOOK_SECRET" doc:"The Stripe webhook endpoint's signing secret (whsec_…); POST /webhooks/stripe is served only with it."`
	ReconcileEvery      time.Duration `env:"PAYMENT_RECONCILE_EVERY" envDefault:"10s" doc:"How often payment attempts left in doubt are resolved with the provider; 0 turns it off."`
	RollForward         time.Duration `env:"PAYMENT_ROLL_FORWARD" envDefault:"15m" doc:"How long after it was made an attempt in doubt may still be sent again; at least 1m and 5 × IDEMPOTENCY_LEASE."`

	OrderExpiry time.Duration `env:"ORDER_EXPIRY" envDefault:"30m" min:"1" doc:"How long an order may wait unpaid before the sweep cancels it."`

	MaxPendingOrders int `env:"MAX_PENDING_ORDERS" envDefault:"3" min:"1" max:"1000000" want:"a whole number from 1 to 1000000" doc:"The most unpaid orders one shopper may hold at once; beyond, 409 too-many-pending-orders."`
	// GroupCommit: enough that a queue of concurrent requests shares one
	// fsync, few enough that the first of them is not held long for the last.
	GroupCommit int `env:"SQLITE_GROUP_COMMIT" envDefault:"32" min:"1" max:"1000" want:"a whole number from 1 to 1000, the most transactions one SQLite commit holds (1: each its own)" doc:"SQLite only: the most transactions one COMMIT holds."`

	// ReadTimeout bounds a whole request, body included: a client sending a
	// byte at a time cannot hold a connection (or a shutdown).
	ReadTimeout  time.Duration `env:"HTTP_READ_TIMEOUT" envDefault:"30s" doc:"How long a client may take to send a whole request."`
	IdleTimeout  time.Duration `env:"HTTP_IDLE_TIMEOUT" envDefault:"60s" doc:"How long an idle keep-alive connection stays open."`
	WriteTimeout time.Duration `env:"HTTP_WRITE_TIMEOUT" doc:"How long from a request's headers to the end of its answer; empty: the slowest request plus 30s."`

	CredentialsPerMinute int           `env:"CREDENTIALS_PER_MINUTE" envDefault:"60" want:"a whole number, 0 for no limit, such as 60" doc:"Sign-ups and log-ins per client address per minute; 0 for no limit."`
	LoginFailures        int           `env:"LOGIN_FAILURES" envDefault:"10" want:"a whole number, 0 for no limit, such as 10" doc:"Failed log-ins per account and address within LOGIN_FAILURE_WINDOW; 0 for no limit."`
	LoginFailureWindow   time.Duration `env:"LOGIN_FAILURE_WINDOW" envDefault:"15m" doc:"The window LOGIN_FAILURES counts in."`

	LogLevel  slog.Level `env:"LOG_LEVEL" envDefault:"info" want:"debug, info, warn or error" doc:"Log level: debug, info, warn or error."`
	LogFormat string     `env:"LOG_FORMAT" envDefault:"text" oneof:"text json" doc:"Log format: text, or json for a log collector."`
	Env       string     `env:"SHOP_ENV" envDefault:"development" oneof:"development production" doc:"development or production, which requires SESSION_SECRET and marks cookies Secure."`
	// Without a SessionSecret, outside production, the server makes a random one.
	SessionSecret  string   `env:"SESSION_SECRET" doc:"Signs session cookies and pushed answers: at least 32 characters, the same on every instance."`
	TrustedProxies Prefixes `env:"TRUSTED_PROXIES" doc:"The reverse proxies whose X-Forwarded-For names the client: addresses and CIDR ranges, comma-separated."`
	CORSOrigins    Origins  `env:"CORS_ORIGINS" doc:"Origins whose pages may call the JSON API from a browser, comma-separated, as the browser sends them."`
	MetricsToken   string   `env:"METRICS_TOKEN" doc:"The bearer token a client other than loopback sends to read /metrics; empty: only loopback may."`
	// A day idle: a shopper back the next day is still signed in; a session
	// left on a shared or lost device dies within a day of its last use.
	SessionIdle   time.Duration `env:"SESSION_IDLE_TIMEOUT" envDefault:"24h" min:"1" doc:"A browser session ends after this long without a request."`
	SessionMaxAge time.Duration `env:"SESSION_MAX_AGE" envDefault:"336h" min:"1" doc:"A browser session ends this long after log-in, however busy."`

	SMTPURL            string        `env:"SMTP_URL" doc:"Where receipts are sent, smtp:// or smtps://; empty: .eml files under MAIL_DIR."`
	MailDir            string        `env:"MAIL_DIR" envDefault:"data/mail" doc:"Where receipts are written when SMTP_URL is empty."`
	MailFrom           string        `env:"MAIL_FROM" envDefault:"shop@localhost" is:"email" want:"an email address, such as shop@example.com" doc:"The receipts' sender."`
	WebhookURL         string        `env:"WEBHOOK_URL" is:"http" want:"the merchant's endpoint, such as https://merchant.example.com/webhooks" doc:"The merchant's webhook endpoint; empty: no webhooks."`
	WebhookSecret      string        `env:"WEBHOOK_SECRET" doc:"The webhooks' signing secret, whsec_ and base64, required with WEBHOOK_URL."`
	WebhookMaxAttempts int           `env:"WEBHOOK_MAX_ATTEMPTS" envDefault:"8" min:"1" want:"a whole number of at least 1" doc:"Attempts per webhook delivery before it is failed."`
	WebhookTimeout     time.Duration `env:"WEBHOOK_TIMEOUT" envDefault:"10s" min:"1" doc:"One webhook POST's timeout."`
	WebhookBackoff     time.Duration `env:"WEBHOOK_BACKOFF" envDefault:"5s" min:"1" doc:"The wait before a delivery's second attempt, doubling after."`
	WebhookMaxBackoff  time.Duration `env:"WEBHOOK_MAX_BACKOFF" envDefault:"1h" min:"1" doc:"The longest wait between a delivery's attempts."`
	WebhookKey         []byte        `env:"-"` // WEBHOOK_SECRET decoded, with a WEBHOOK_URL

	OutboxPollInterval time.Duration `env:"OUTBOX_POLL_INTERVAL" envDefault:"1s" min:"1" doc:"How often the outbox's relay looks for new events."`
	OutboxLease        time.Duration `env:"OUTBOX_LEASE" envDefault:"15s" min:"1" doc:"How long an instance keeps a consumer without renewing; at least twice OUTBOX_POLL_INTERVAL."`
	OutboxMaxAttempts  int           `env:"OUTBOX_MAX_ATTEMPTS" envDefault:"60" min:"1" want:"a whole number of at least 1" doc:"Attempts a consumer makes at one event, waiting 1 s doubling to 30 min between them (about a day), before the event is parked for staff."`
	NATSURL            string        `env:"NATS_URL" is:"nats" want:"the NATS server's URL, such as nats://127.0.0.1:4222" doc:"The NATS server (with JetStream) events are published to; empty publishes nothing."`
	NATSStream         string        `env:"NATS_STREAM" envDefault:"SHOP" is:"token" want:"a stream name of letters, digits, - and _" doc:"The JetStream stream, created if missing."`
	NATSPrefix         string        `env:"NATS_SUBJECT_PREFIX" envDefault:"shop" is:"subject" want:"subject tokens such as shop or acme.shop, no wildcards" doc:"The prefix of the events' subjects: shop.order.paid…"`
}

// Production is SHOP_ENV=production: a deploy, where SESSION_SECRET is required.
func (c Config) Production() bool { return c.Env == "production" }

// ReplayCacheBytes is IDEMPOTENCY_CACHE_BYTES as handlers.Deps has it: negative for no cache.
func (c Config) ReplayCacheBytes() int64 {
	if c.IdempotencyCacheBytes == 0 {
		return -1
	}
	return c.IdempotencyCacheBytes
}

// AttemptTimeout is how long one attempt may run, as the middleware has it.
func (c Config) AttemptTimeout() time.Duration {
	return middleware.Config{Lease: c.IdempotencyLease}.AttemptTimeout()
}

// slowestRequest is how long a request may take: a duplicate waits up to
// IDEMPOTENCY_WAIT for an attempt that runs up to its timeout.
func (c Config) slowestRequest() time.Duration {
	return c.AttemptTimeout() + c.IdempotencyWait
}

// Default is the table's defaults, as if nothing were set.
func Default() Config {
	c, err := Load(func(string) string { return "" })
	if err != nil {
		panic("config: the defaults do not pass their own checks: " + err.Error())
	}
	return c
}
