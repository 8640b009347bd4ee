package main

import (
	"fmt"
	"net/mail"
	"net/url"
	"strconv"
	"time"

	"github.com/shop/shop/notify"
)

// notifyConfig is where receipts and the merchant's webhooks go.
type notifyConfig struct {
	// SMTPURL sends receipts (SMTP_URL); when empty they are written as
	// .eml files under MailDir (MAIL_DIR). MailFrom is their sender.
	SMTPURL, MailDir, MailFrom string
	// WebhookURL is the merchant's endpoint (WEBHOOK_URL): none, no
	// webhooks. WebhookKey is WEBHOOK_SECRET's key, decoded.
	WebhookURL         string
	WebhookKey         []byte
	WebhookMaxAttempts int
	// WebhookTimeout bounds one POST; WebhookBackoff is the wait before the
	// second attempt, doubling up to WebhookMaxBackoff.
	WebhookTimeout, WebhookBackoff, WebhookMaxBackoff time.Duration
}

// loadNotify reads SMTP_URL, MAIL_DIR, MAIL_FROM, WEBHOOK_URL,
// WEBHOOK_SECRET (required with a WEBHOOK_URL), WEBHOOK_MAX_ATTEMPTS,
// WEBHOOK_TIMEOUT, WEBHOOK_BACKOFF and WEBHOOK_MAX_BACKOFF.
func (cfg *notifyConfig) loadNotify(getenv func(string) string) []error {
	var errs []error
	cfg.SMTPURL, cfg.MailDir = getenv("SMTP_URL"), withDefault(getenv("MAIL_DIR"), "data/mail")
	if _, err := notify.NewMailer(cfg.SMTPURL, cfg.MailDir); err != nil {
		errs = append(errs, fmt.Errorf("SMTP_URL: %w", err))
	}
	cfg.MailFrom = withDefault(getenv("MAIL_FROM"), "shop@localhost")
	if _, err := mail.ParseAddress(cfg.MailFrom); err != nil {
		errs = append(errs, fmt.Errorf("MAIL_FROM=%q: want an email address, such as shop@example.com", cfg.MailFrom))
	}
	n, err := strconv.Atoi(withDefault(getenv("WEBHOOK_MAX_ATTEMPTS"), "8"))
	if err != nil || n < 1 {
		errs = append(errs, fmt.Errorf("WEBHOOK_MAX_ATTEMPTS=%q: want a whole number of at least 1", getenv("WEBHOOK_MAX_ATTEMPTS")))
	}
	cfg.WebhookMaxAttempts = n
	for _, d := range []struct {
		name, fallback string
		dst            *time.Duration
	}{
		{"WEBHOOK_TIMEOUT", "10s", &cfg.WebhookTimeout},
		{"WEBHOOK_BACKOFF", "5s", &cfg.WebhookBackoff},
		{"WEBHOOK_MAX_BACKOFF", "1h", &cfg.WebhookMaxBackoff},
	} {
		v, err := time.ParseDuration(withDefault(getenv(d.name), d.fallback))
		if err != nil || v <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as %s", d.name, getenv(d.name), d.fallback))
		}
		*d.dst = v
	}
	return append(errs, cfg.loadWebhook(getenv)...)
}

// loadWebhook reads WEBHOOK_URL and its secret: with no secret, or one not
// in the whsec_<base64> form, the shop does not start.
func (cfg *notifyConfig) loadWebhook(getenv func(string) string) []error {
	cfg.WebhookURL = getenv("WEBHOOK_URL")
	if cfg.WebhookURL == "" {
		return nil
	}
	if u, err := url.Parse(cfg.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return []error{fmt.Errorf("WEBHOOK_URL=%q: want the merchant's endpoint, such as https://merchant.example.com/webhooks", cfg.WebhookURL)}
	}
	key, err := notify.ParseSecret(getenv("WEBHOOK_SECRET"))
	if err != nil {
		return []error{fmt.Errorf("WEBHOOK_SECRET (required with WEBHOOK_URL): %w", err)}
	}
	cfg.WebhookKey = key
	return nil
}
