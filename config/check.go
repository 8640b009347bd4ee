package config

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/shop/shop/database"
	"github.com/shop/shop/notify"
)

const (
	// writeMargin is what the default HTTP_WRITE_TIMEOUT adds to the slowest
	// request, for recording its outcome and sending the answer.
	writeMargin = 30 * time.Second
	// maxTokenCacheTTL bounds how long a token revoked on one instance still works on the others.
	maxTokenCacheTTL = time.Minute
	// minRollForward: a provider's search (Stripe's) may take about a minute to show a charge.
	minRollForward = time.Minute
	minSecret      = 32 // characters of SESSION_SECRET
)

// formats are what a string's `is` tag asks of its value, when it is set.
var formats = map[string]func(string) bool{
	"ip":   func(s string) bool { return net.ParseIP(s) != nil || s == "localhost" },
	"http": httpURL,
	"email": func(s string) bool {
		_, err := mail.ParseAddress(s)
		return err == nil
	},
	"nats": func(s string) bool {
		u, err := url.Parse(s)
		return err == nil && u.Host != ""
	},
	// NATS tokens, dot-separated, no wildcards; a stream's name is one token.
	"subject": regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`).MatchString,
	"token":   regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString,
}

// check checks what the tags cannot: the database's URL, the secrets and
// keys, and the receipts' mailer.
func (c *Config) check() []error {
	var errs []error
	if err := database.CheckURL(c.DatabaseURL); err != nil {
		errs = append(errs, err)
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
	if _, err := notify.NewMailer(c.SMTPURL, c.MailDir); err != nil {
		errs = append(errs, fmt.Errorf("SMTP_URL: %w", err))
	}
	if c.WebhookURL != "" {
		key, err := notify.ParseSecret(c.WebhookSecret)
		if err != nil {
			errs = append(errs, fmt.Errorf("WEBHOOK_SECRET (required with WEBHOOK_URL): %w", err))
		}
		c.WebhookKey = key
	}
	return append(errs, c.checkStripe()...)
}

// checkStripe checks the secrets of Stripe, which come from the
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
	if c.StripeWebhookSecret != "" && !strings.HasPrefix(c.StripeWebhookSecret, "whsec_") {
		errs = append(errs, errors.New("STRIPE_WEBHOOK_SECRET must be an endpoint signing secret (whsec_…)"))
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
