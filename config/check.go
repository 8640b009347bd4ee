package config

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shop/shop/database"
	"github.com/shop/shop/notify"
)

const (
	// writeMargin is what the default HTTP_WRITE_TIMEOUT adds to the slowest
	// request, for recording its outcome and sending the answer.
	writeMargin = 30 * time.Second
	// maxTokenCacheTTL is the longest TOKEN_CACHE_TTL accepted, so that the
	// time a revocation takes to reach every instance stays short.
	maxTokenCacheTTL = time.Minute
	// minRollForward is the shortest PAYMENT_ROLL_FORWARD accepted: a
	// provider's search (Stripe's) may take about a minute to show a charge.
	minRollForward = time.Minute
	// minSecret is the shortest SESSION_SECRET accepted: 32 characters.
	minSecret = 32
)

// natsName is what a subject prefix may be: NATS tokens, dot-separated, no
// wildcards; streamName is one token.
var (
	natsName   = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	streamName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// check checks what each setting means on its own, beyond its type and
// bounds, and fills in the defaults that depend on other settings.
func (c *Config) check() []error {
	var errs []error
	if err := database.CheckURL(c.DatabaseURL); err != nil {
		errs = append(errs, err)
	}
	if c.Host != "" && net.ParseIP(c.Host) == nil && c.Host != "localhost" {
		errs = append(errs, fmt.Errorf("HOST=%q: want an IP address to listen on, such as 127.0.0.1, or empty for every interface", c.Host))
	}
	switch {
	case c.SessionSecret == "" && c.Production():
		errs = append(errs, errors.New("SESSION_SECRET is required when SHOP_ENV=production (make one with: openssl rand -hex 32)"))
	case c.SessionSecret != "" && len(c.SessionSecret) < minSecret:
		errs = append(errs, fmt.Errorf("SESSION_SECRET is %d characters: want at least %d (make one with: openssl rand -hex 32)", len(c.SessionSecret), minSecret))
	}
	if c.TokenCacheTTL > maxTokenCacheTTL {
		errs = append(errs, fmt.Errorf("TOKEN_CACHE_TTL (%s) must be at most %s, or 0 for no cache: a revoked token keeps working that long on the other instances", c.TokenCacheTTL, maxTokenCacheTTL))
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.PublicURL == "" {
		c.PublicURL = "http://localhost:" + strconv.Itoa(c.Port)
	}
	if !httpURL(c.PublicURL) {
		errs = append(errs, fmt.Errorf("PUBLIC_URL=%q: want the shop's address, such as https://shop.example.com", c.PublicURL))
	}
	errs = append(errs, c.checkStripe()...)
	errs = append(errs, c.checkNotify()...)
	return append(errs, c.checkMessages()...)
}

// checkStripe checks the provider's keys. Stripe keys come from the
// environment only; a live key needs SHOP_ENV=production.
func (c *Config) checkStripe() []error {
	var errs []error
	if c.PaymentProvider == "stripe" {
		switch key := c.StripeSecretKey; {
		case key == "":
			errs = append(errs, errors.New("STRIPE_SECRET_KEY is required when PAYMENT_PROVIDER=stripe (a test key, sk_test_…)"))
		case strings.HasPrefix(key, "sk_live_") || strings.HasPrefix(key, "rk_live_"):
			if !c.Production() {
				errs = append(errs, errors.New("STRIPE_SECRET_KEY is a live key: refused unless SHOP_ENV=production"))
			}
		case !strings.HasPrefix(key, "sk_test_") && !strings.HasPrefix(key, "rk_test_"):
			errs = append(errs, errors.New("STRIPE_SECRET_KEY must be a Stripe secret key (sk_test_… or sk_live_…)"))
		}
	}
	if c.StripeAPIBase != "" && !httpURL(c.StripeAPIBase) {
		errs = append(errs, fmt.Errorf("STRIPE_API_BASE=%q: want a URL such as http://127.0.0.1:12111 (stripe-mock)", c.StripeAPIBase))
	}
	if c.StripeWebhookSecret != "" && !strings.HasPrefix(c.StripeWebhookSecret, "whsec_") {
		errs = append(errs, errors.New("STRIPE_WEBHOOK_SECRET must be an endpoint signing secret (whsec_…)"))
	}
	return errs
}

// checkNotify checks where receipts and webhooks go: with a WEBHOOK_URL,
// a WEBHOOK_SECRET in the whsec_<base64> form is required.
func (c *Config) checkNotify() []error {
	var errs []error
	if _, err := notify.NewMailer(c.SMTPURL, c.MailDir); err != nil {
		errs = append(errs, fmt.Errorf("SMTP_URL: %w", err))
	}
	if _, err := mail.ParseAddress(c.MailFrom); err != nil {
		errs = append(errs, fmt.Errorf("MAIL_FROM=%q: want an email address, such as shop@example.com", c.MailFrom))
	}
	if c.WebhookURL == "" {
		return errs
	}
	if !httpURL(c.WebhookURL) {
		return append(errs, fmt.Errorf("WEBHOOK_URL=%q: want the merchant's endpoint, such as https://merchant.example.com/webhooks", c.WebhookURL))
	}
	key, err := notify.ParseSecret(c.WebhookSecret)
	if err != nil {
		return append(errs, fmt.Errorf("WEBHOOK_SECRET (required with WEBHOOK_URL): %w", err))
	}
	c.WebhookKey = key
	return errs
}

// checkMessages checks where the outbox's events are published.
func (c *Config) checkMessages() []error {
	var errs []error
	if u, err := url.Parse(c.NATSURL); c.NATSURL != "" && (err != nil || u.Host == "") {
		errs = append(errs, fmt.Errorf("NATS_URL=%q: want the NATS server's URL, such as nats://127.0.0.1:4222", c.NATSURL))
	}
	if !streamName.MatchString(c.NATSStream) {
		errs = append(errs, fmt.Errorf("NATS_STREAM=%q: want a stream name of letters, digits, - and _", c.NATSStream))
	}
	if !natsName.MatchString(c.NATSPrefix) {
		errs = append(errs, fmt.Errorf("NATS_SUBJECT_PREFIX=%q: want subject tokens such as shop or acme.shop, no wildcards", c.NATSPrefix))
	}
	return errs
}

// checkTogether checks how the settings bound one another, and fills in
// the timeouts that follow from them.
func (c *Config) checkTogether() []error {
	var errs []error
	if c.TokenTTL == 0 {
		errs = append(errs, errors.New("TOKEN_TTL must be positive: a token that expires at once is no token"))
	}
	if c.LoginFailures > 0 && c.LoginFailureWindow <= 0 {
		errs = append(errs, fmt.Errorf("LOGIN_FAILURE_WINDOW (%s) must be positive when LOGIN_FAILURES is set", c.LoginFailureWindow))
	}
	if c.SessionIdle > c.SessionMaxAge {
		errs = append(errs, fmt.Errorf("SESSION_IDLE_TIMEOUT (%s) must be at most SESSION_MAX_AGE (%s)", c.SessionIdle, c.SessionMaxAge))
	}
	if c.OutboxLease < 2*c.OutboxPollInterval {
		errs = append(errs, fmt.Errorf("OUTBOX_LEASE (%s) must be at least twice OUTBOX_POLL_INTERVAL (%s): the relay renews its lease as it polls", c.OutboxLease, c.OutboxPollInterval))
	}
	if err := c.checkTimeouts(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkTimeouts checks the idempotency and HTTP timeouts against one
// another. An attempt may run for its timeout and hold its key for one
// more lease after it; a key that expired meanwhile would store an answer
// already forgotten, and a retry would run the operation again.
func (c *Config) checkTimeouts() error {
	switch minTTL := c.AttemptTimeout() + c.IdempotencyLease; {
	case c.IdempotencyTTL < minTTL:
		return fmt.Errorf("IDEMPOTENCY_TTL (%s) must be at least %d × IDEMPOTENCY_LEASE (%s): an attempt may run for %d leases, and its key must outlive it by one more",
			c.IdempotencyTTL, minTTL/c.IdempotencyLease, minTTL, c.AttemptTimeout()/c.IdempotencyLease)
	case c.RollForward < max(minRollForward, minTTL):
		return fmt.Errorf("PAYMENT_ROLL_FORWARD (%s) must be at least %s: past it an attempt is only looked up, and its first request may not still be running then",
			c.RollForward, max(minRollForward, minTTL))
	case c.ReadTimeout <= 0 || c.IdleTimeout <= 0:
		return fmt.Errorf("HTTP_READ_TIMEOUT (%s) and HTTP_IDLE_TIMEOUT (%s) must be positive", c.ReadTimeout, c.IdleTimeout)
	case c.WriteTimeout == 0:
		c.WriteTimeout = c.slowestRequest() + writeMargin
	case c.WriteTimeout < c.slowestRequest():
		return fmt.Errorf("HTTP_WRITE_TIMEOUT (%s) must be at least 4 × IDEMPOTENCY_LEASE + IDEMPOTENCY_WAIT (%s), or empty: a slow payment would lose its answer",
			c.WriteTimeout, c.slowestRequest())
	}
	return nil
}

// httpURL reports whether raw is an absolute http or https URL with a host.
func httpURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
