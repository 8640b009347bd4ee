package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shop/shop/database"
	"github.com/shop/shop/middleware"
)

// config is the environment, parsed and checked once at start-up.
type config struct {
	Host             string
	Port             int
	DatabaseURL      string
	IdempotencyTTL   time.Duration
	IdempotencyLease time.Duration
	IdempotencyWait  time.Duration
	// IdempotencyCacheBytes bounds the replay cache; 0 turns it off.
	IdempotencyCacheBytes int64
	TokenTTL              time.Duration
	// TokenCacheTTL is how long an instance trusts a bearer-token lookup
	// (so how long a token revoked elsewhere may still work on it), at most
	// maxTokenCacheTTL. TOKEN_CACHE_TTL=0 turns the cache off: negative
	// here, as handlers.Deps has it.
	TokenCacheTTL  time.Duration
	PaymentLatency time.Duration
	// PaymentProvider is "simulated" (the default) or "stripe".
	PaymentProvider string
	// StripeSecretKey, StripeAPIBase and StripeWebhookSecret configure the
	// Stripe provider and its webhook endpoint.
	StripeSecretKey, StripeAPIBase, StripeWebhookSecret string
	// ReconcileEvery is how often payment attempts left in doubt are
	// resolved with the provider; 0 turns the reconciler off.
	ReconcileEvery time.Duration
	// RollForward is the roll-forward window: how long after it was made an
	// attempt in doubt may still be sent again, and so charged; older ones
	// are only looked up (billing.Config.RollForward).
	RollForward time.Duration
	// AuthExpiry, PublicURL: PAYMENT_AUTH_EXPIRY, PUBLIC_URL (config_auth.go).
	AuthExpiry time.Duration
	PublicURL  string
	// ReadTimeout bounds reading a whole request, body included, so that a
	// client sending its body a byte at a time cannot hold a connection
	// (or a shutdown); IdleTimeout bounds a keep-alive connection between
	// requests; WriteTimeout bounds a request from the end of its headers
	// to the end of its answer, so it must outlast the slowest attempt.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// CredentialsPerMinute bounds sign-ups and log-ins per client address;
	// LoginFailures bounds failed log-ins per account within
	// LoginFailureWindow. Zero: no limit.
	CredentialsPerMinute, LoginFailures int
	LoginFailureWindow                  time.Duration
	LogLevel                            slog.Level
	// LogJSON is LOG_FORMAT=json: one JSON object per line, for collectors.
	LogJSON bool
	// Production is SHOP_ENV=production: a deploy, where SESSION_SECRET is required.
	Production bool
	// SessionSecret signs the browser's session cookies. Empty outside
	// production when SESSION_SECRET is unset: the server then makes a random
	// one at start, and sessions end when it restarts.
	SessionSecret []byte
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (TRUSTED_PROXIES); none by default.
	TrustedProxies []netip.Prefix
	// CORSOrigins may call the API from their pages (CORS_ORIGINS; config_cors.go).
	CORSOrigins []string
	sessionConfig
	orderConfig
	groupCommitConfig
	messageConfig
	notifyConfig
}

// defaultDatabase is where `go run .` keeps its data when DATABASE_URL is empty.
const defaultDatabase = "data/shop.db"

func loadConfig(getenv func(string) string) (config, error) {
	cfg := config{DatabaseURL: getenv("DATABASE_URL")}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = defaultDatabase
	}
	errs := cfg.loadServer(getenv)
	errs = append(errs, cfg.loadCORS(getenv)...)
	timing := cfg.loadDurations(getenv)
	timing = append(timing, cfg.loadLimits(getenv)...)
	errs = append(errs, timing...)
	if len(timing) == 0 && cfg.TokenTTL == 0 {
		errs = append(errs, errors.New("TOKEN_TTL must be positive: a token that expires at once is no token"))
	}
	switch {
	case cfg.TokenCacheTTL > maxTokenCacheTTL:
		errs = append(errs, fmt.Errorf("TOKEN_CACHE_TTL (%s) must be at most %s, or 0 for no cache: a revoked token keeps working that long on the other instances", cfg.TokenCacheTTL, maxTokenCacheTTL))
	case cfg.TokenCacheTTL == 0:
		cfg.TokenCacheTTL = -1
	}
	errs = append(errs, cfg.loadLogging(getenv)...)
	errs = append(errs, cfg.loadDeployment(getenv)...)
	errs = append(errs, cfg.loadStripe(getenv)...)
	errs = append(errs, cfg.loadAuth(getenv)...)
	errs = append(errs, cfg.loadNetwork(getenv)...)
	errs = append(errs, cfg.loadSessions(getenv)...)
	errs = append(errs, cfg.loadOrders(getenv)...)
	errs = append(errs, cfg.loadGroupCommit(getenv)...)
	errs = append(errs, cfg.loadMessages(getenv)...)
	errs = append(errs, cfg.loadNotify(getenv)...)
	if len(errs) > 0 {
		return cfg, settingErrors(errs)
	}
	return cfg, nil
}

// loadServer checks the database URL and reads where to listen.
func (cfg *config) loadServer(getenv func(string) string) []error {
	var errs []error
	if err := database.CheckURL(cfg.DatabaseURL); err != nil {
		errs = append(errs, err)
	}
	port, err := strconv.Atoi(withDefault(getenv("PORT"), "8080"))
	if err != nil || port < 0 || port > 65535 {
		errs = append(errs, fmt.Errorf("PORT=%q: want a port number 0–65535", getenv("PORT")))
	}
	cfg.Port = port
	cfg.Host = strings.TrimSpace(getenv("HOST"))
	if cfg.Host != "" && net.ParseIP(cfg.Host) == nil && cfg.Host != "localhost" {
		errs = append(errs, fmt.Errorf("HOST=%q: want an IP address to listen on, such as 127.0.0.1, or empty for every interface", cfg.Host))
	}
	return errs
}

// loadDurations reads every duration setting and, once all of them parse,
// checks how they bound one another.
func (cfg *config) loadDurations(getenv func(string) string) []error {
	durations := []struct {
		name, fallback string
		dst            *time.Duration
	}{
		{"IDEMPOTENCY_TTL", "24h", &cfg.IdempotencyTTL},
		{"IDEMPOTENCY_LEASE", "30s", &cfg.IdempotencyLease},
		{"IDEMPOTENCY_WAIT", "5s", &cfg.IdempotencyWait},
		{"TOKEN_TTL", "720h", &cfg.TokenTTL},
		{"TOKEN_CACHE_TTL", "5s", &cfg.TokenCacheTTL},
		{"PAYMENT_LATENCY", "50ms", &cfg.PaymentLatency},
		{"PAYMENT_RECONCILE_EVERY", "10s", &cfg.ReconcileEvery},
		{"PAYMENT_ROLL_FORWARD", "15m", &cfg.RollForward},
		{"HTTP_READ_TIMEOUT", "30s", &cfg.ReadTimeout},
		{"HTTP_IDLE_TIMEOUT", "60s", &cfg.IdleTimeout},
		{"HTTP_WRITE_TIMEOUT", "0s", &cfg.WriteTimeout},
		{"LOGIN_FAILURE_WINDOW", "15m", &cfg.LoginFailureWindow},
	}
	var errs []error
	for _, d := range durations {
		v, err := time.ParseDuration(withDefault(getenv(d.name), d.fallback))
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a non-negative duration such as %s", d.name, getenv(d.name), d.fallback))
			continue
		}
		*d.dst = v
	}
	if len(errs) > 0 {
		return errs
	}
	// An attempt may run for its timeout and hold its key for one more
	// lease after it; a key that expired meanwhile would store an answer
	// already forgotten, and a retry would run the operation again.
	switch minTTL := cfg.attemptTimeout() + cfg.IdempotencyLease; {
	case cfg.IdempotencyLease <= 0:
		return []error{fmt.Errorf("IDEMPOTENCY_LEASE (%s) must be positive", cfg.IdempotencyLease)}
	case cfg.IdempotencyTTL < minTTL:
		return []error{fmt.Errorf("IDEMPOTENCY_TTL (%s) must be at least %d × IDEMPOTENCY_LEASE (%s): an attempt may run for %d leases, and its key must outlive it by one more",
			cfg.IdempotencyTTL, minTTL/cfg.IdempotencyLease, minTTL, cfg.attemptTimeout()/cfg.IdempotencyLease)}
	case cfg.RollForward < max(minRollForward, minTTL):
		return []error{fmt.Errorf("PAYMENT_ROLL_FORWARD (%s) must be at least %s: past it an attempt is only looked up, and its first request may not still be running then",
			cfg.RollForward, max(minRollForward, minTTL))}
	case cfg.ReadTimeout <= 0 || cfg.IdleTimeout <= 0:
		return []error{fmt.Errorf("HTTP_READ_TIMEOUT (%s) and HTTP_IDLE_TIMEOUT (%s) must be positive", cfg.ReadTimeout, cfg.IdleTimeout)}
	case cfg.WriteTimeout == 0:
		cfg.WriteTimeout = cfg.slowestRequest() + writeMargin
	case cfg.WriteTimeout < cfg.slowestRequest():
		return []error{fmt.Errorf("HTTP_WRITE_TIMEOUT (%s) must be at least 4 × IDEMPOTENCY_LEASE + IDEMPOTENCY_WAIT (%s), or empty: a slow payment would lose its answer",
			cfg.WriteTimeout, cfg.slowestRequest())}
	}
	return nil
}

// loadLimits reads the rate limits and the replay cache's size.
func (cfg *config) loadLimits(getenv func(string) string) []error {
	var errs []error
	for _, n := range []struct {
		name, fallback string
		dst            *int
	}{
		{"CREDENTIALS_PER_MINUTE", "60", &cfg.CredentialsPerMinute},
		{"LOGIN_FAILURES", "10", &cfg.LoginFailures},
	} {
		v, err := strconv.Atoi(withDefault(getenv(n.name), n.fallback))
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number, 0 for no limit, such as %s", n.name, getenv(n.name), n.fallback))
		}
		*n.dst = v
	}
	cacheBytes, err := strconv.ParseInt(withDefault(getenv("IDEMPOTENCY_CACHE_BYTES"), "67108864"), 10, 64)
	if err != nil || cacheBytes < 0 {
		errs = append(errs, fmt.Errorf("IDEMPOTENCY_CACHE_BYTES=%q: want a whole number of bytes, 0 for no cache, such as 67108864 (64 MiB)", getenv("IDEMPOTENCY_CACHE_BYTES")))
	}
	cfg.IdempotencyCacheBytes = cacheBytes
	if cfg.LoginFailures > 0 && cfg.LoginFailureWindow <= 0 {
		errs = append(errs, fmt.Errorf("LOGIN_FAILURE_WINDOW (%s) must be positive when LOGIN_FAILURES is set", cfg.LoginFailureWindow))
	}
	return errs
}

// loadLogging reads the log level and format.
func (cfg *config) loadLogging(getenv func(string) string) []error {
	var errs []error
	if err := cfg.LogLevel.UnmarshalText([]byte(withDefault(getenv("LOG_LEVEL"), "info"))); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", getenv("LOG_LEVEL")))
	}
	switch format := withDefault(getenv("LOG_FORMAT"), "text"); format {
	case "text":
	case "json":
		cfg.LogJSON = true
	default:
		errs = append(errs, fmt.Errorf("LOG_FORMAT=%q: want text or json", format))
	}
	return errs
}

// loadDeployment reads whether this is production, and the session secret
// production requires.
func (cfg *config) loadDeployment(getenv func(string) string) []error {
	var errs []error
	switch env := withDefault(getenv("SHOP_ENV"), "development"); env {
	case "development":
	case "production":
		cfg.Production = true
	default:
		errs = append(errs, fmt.Errorf("SHOP_ENV=%q: want development or production", env))
	}
	switch secret := strings.TrimSpace(getenv("SESSION_SECRET")); {
	case secret == "" && cfg.Production:
		errs = append(errs, errors.New("SESSION_SECRET is required when SHOP_ENV=production (make one with: openssl rand -hex 32)"))
	case secret != "" && len(secret) < minSecret:
		errs = append(errs, fmt.Errorf("SESSION_SECRET is %d characters: want at least %d (make one with: openssl rand -hex 32)", len(secret), minSecret))
	case secret != "":
		cfg.SessionSecret = []byte(secret)
	}
	return errs
}

// loadStripe reads the payment provider's settings. Stripe keys come from
// the environment only; a live key needs SHOP_ENV=production.
func (cfg *config) loadStripe(getenv func(string) string) []error {
	var errs []error
	cfg.PaymentProvider = withDefault(getenv("PAYMENT_PROVIDER"), "simulated")
	cfg.StripeSecretKey = strings.TrimSpace(getenv("STRIPE_SECRET_KEY"))
	cfg.StripeAPIBase = strings.TrimSpace(getenv("STRIPE_API_BASE"))
	cfg.StripeWebhookSecret = strings.TrimSpace(getenv("STRIPE_WEBHOOK_SECRET"))
	switch cfg.PaymentProvider {
	case "simulated":
	case "stripe":
		switch key := cfg.StripeSecretKey; {
		case key == "":
			errs = append(errs, errors.New("STRIPE_SECRET_KEY is required when PAYMENT_PROVIDER=stripe (a test key, sk_test_…)"))
		case strings.HasPrefix(key, "sk_live_") || strings.HasPrefix(key, "rk_live_"):
			if !cfg.Production {
				errs = append(errs, errors.New("STRIPE_SECRET_KEY is a live key: refused unless SHOP_ENV=production"))
			}
		case !strings.HasPrefix(key, "sk_test_") && !strings.HasPrefix(key, "rk_test_"):
			errs = append(errs, errors.New("STRIPE_SECRET_KEY must be a Stripe secret key (sk_test_… or sk_live_…)"))
		}
	default:
		errs = append(errs, fmt.Errorf("PAYMENT_PROVIDER=%q: want simulated or stripe", cfg.PaymentProvider))
	}
	if cfg.StripeAPIBase != "" {
		if u, err := url.Parse(cfg.StripeAPIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("STRIPE_API_BASE=%q: want a URL such as http://127.0.0.1:12111 (stripe-mock)", cfg.StripeAPIBase))
		}
	}
	if cfg.StripeWebhookSecret != "" && !strings.HasPrefix(cfg.StripeWebhookSecret, "whsec_") {
		errs = append(errs, errors.New("STRIPE_WEBHOOK_SECRET must be an endpoint signing secret (whsec_…)"))
	}
	return errs
}

// settingErrors are every configuration error at once: errors.Join, on one
// line, so that start-up fails with a single clear message.
type settingErrors []error

func (e settingErrors) Error() string {
	return strings.ReplaceAll(errors.Join(e...).Error(), "\n", "; ")
}

func (e settingErrors) Unwrap() []error { return e }

// slowestRequest is how long a request may legitimately take: a duplicate
// waits for its original up to IDEMPOTENCY_WAIT, and an attempt runs for
// at most its timeout.
func (cfg config) slowestRequest() time.Duration {
	return cfg.attemptTimeout() + cfg.IdempotencyWait
}

// attemptTimeout is how long one attempt may run, as the middleware
// configured by these settings has it: 4 × IDEMPOTENCY_LEASE.
func (cfg config) attemptTimeout() time.Duration {
	return middleware.Config{Lease: cfg.IdempotencyLease}.AttemptTimeout()
}

// writeMargin is what the default HTTP_WRITE_TIMEOUT adds to the slowest
// request, for recording its outcome and sending the answer.
const writeMargin = 30 * time.Second

// maxTokenCacheTTL is the longest TOKEN_CACHE_TTL accepted, so that the
// time a revocation takes to reach every instance stays short.
const maxTokenCacheTTL = time.Minute

// minRollForward is the shortest PAYMENT_ROLL_FORWARD accepted: a
// provider's search (Stripe's) may take about a minute to show a charge.
const minRollForward = time.Minute

// minSecret is the shortest SESSION_SECRET accepted: 32 characters.
const minSecret = 32

func withDefault(v, fallback string) string {
	if strings.TrimSpace(v) == "" {
		return fallback
	}
	return strings.TrimSpace(v)
}
