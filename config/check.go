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
func (c *Config) check() error {
	const makeOne = " (make one with: openssl rand -hex 32)"
	_, mailer := notify.NewMailer(c.SMTPURL, c.MailDir)
	errs := []error{database.CheckURL(c.DatabaseURL),
		when(c.SessionSecret == "" && c.Production(), errors.New("SESSION_SECRET is required when SHOP_ENV=production"+makeOne)),
		when(c.SessionSecret != "" && len(c.SessionSecret) < minSecret,
			fmt.Errorf("SESSION_SECRET is %d characters: want at least %d%s", len(c.SessionSecret), minSecret, makeOne)),
		when(c.TokenCacheTTL > maxTokenCacheTTL, fmt.Errorf("TOKEN_CACHE_TTL (%s) must be at most %s, or 0 for no cache: "+
			"a revoked token keeps working that long on the other instances", c.TokenCacheTTL, maxTokenCacheTTL)),
		when(mailer != nil, fmt.Errorf("SMTP_URL: %w", mailer)),
	}
	if c.WebhookURL != "" {
		var err error
		c.WebhookKey, err = notify.ParseSecret(c.WebhookSecret)
		errs = append(errs, when(err != nil, fmt.Errorf("WEBHOOK_SECRET (required with WEBHOOK_URL): %w", err)))
	}
	return errors.Join(append(errs, c.checkStripe())...)
}

// when is err if broken, else nil: one rule of a check.
func when(broken bool, err error) error {
	if broken {
		return err
	}
	return nil
}

// checkStripe checks the secrets of Stripe, which come from the
// environment only; a live key needs SHOP_ENV=production.
func (c *Config) checkStripe() error {
	key, stripe := c.StripeSecretKey, c.PaymentProvider == "stripe"
	live := strings.HasPrefix(key, "sk_live_") || strings.HasPrefix(key, "rk_live_")
	test := strings.HasPrefix(key, "sk_test_") || strings.HasPrefix(key, "rk_test_")
	return errors.Join(
		when(stripe && key == "", errors.New("STRIPE_SECRET_KEY is required when PAYMENT_PROVIDER=stripe (a test key, sk_test_…)")),
		when(stripe && live && !c.Production(), errors.New("STRIPE_SECRET_KEY is a live key: refused unless SHOP_ENV=production")),
		when(stripe && key != "" && !live && !test, errors.New("STRIPE_SECRET_KEY must be a Stripe secret key (sk_test_… or sk_live_…)")),
		when(c.StripeWebhookSecret != "" && !strings.HasPrefix(c.StripeWebhookSecret, "whsec_"),
			errors.New("STRIPE_WEBHOOK_SECRET must be an endpoint signing secret (whsec_…)")))
}

// checkTogether checks how the settings bound one another, and fills in
// the timeouts that follow from them.
func (c *Config) checkTogether() error {
	return errors.Join(
		when(c.TokenTTL == 0, errors.New("TOKEN_TTL must be positive: a token that expires at once is no token")),
		when(c.LoginFailures > 0 && c.LoginFailureWindow <= 0,
			fmt.Errorf("LOGIN_FAILURE_WINDOW (%s) must be positive when LOGIN_FAILURES is set", c.LoginFailureWindow)),
		when(c.SessionIdle > c.SessionMaxAge,
			fmt.Errorf("SESSION_IDLE_TIMEOUT (%s) must be at most SESSION_MAX_AGE (%s)", c.SessionIdle, c.SessionMaxAge)),
		when(c.OutboxLease < 2*c.OutboxPollInterval, fmt.Errorf("OUTBOX_LEASE (%s) must be at least twice OUTBOX_POLL_INTERVAL (%s): "+
			"the relay renews its lease as it polls", c.OutboxLease, c.OutboxPollInterval)),
		c.checkTimeouts())
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
