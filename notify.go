package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
)

// webhookEvery is how often the webhook sender looks for deliveries due.
const webhookEvery = time.Second

// notifyConsumers are the consumers of the outbox that tell people: the
// receipt email always (by SMTP, or .eml files), the merchant's webhooks
// when WEBHOOK_URL is set.
func notifyConsumers(cfg config, db *gorm.DB, logger *slog.Logger) ([]outbox.Consumer, error) {
	mailer, err := notify.NewMailer(cfg.SMTPURL, cfg.MailDir)
	if err != nil {
		return nil, err
	}
	domain := "localhost"
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		domain = u.Hostname()
	}
	consumers := []outbox.Consumer{notify.Receipts{Logger: logger, Mailer: mailer, From: cfg.MailFrom, Domain: domain, PublicURL: cfg.PublicURL}}
	if cfg.WebhookURL != "" {
		consumers = append(consumers, notify.Webhooks{})
	}
	return consumers, nil
}

// sendWebhooks posts the deliveries due until ctx ends; nothing without a
// WEBHOOK_URL.
func sendWebhooks(ctx context.Context, cfg config, db *gorm.DB, logger *slog.Logger) {
	if cfg.WebhookURL == "" {
		return
	}
	sender := &notify.Sender{DB: db, URL: cfg.WebhookURL, Key: cfg.WebhookKey, MaxAttempts: cfg.WebhookMaxAttempts,
		Timeout: cfg.WebhookTimeout, Backoff: cfg.WebhookBackoff, MaxBackoff: cfg.WebhookMaxBackoff,
		Logger: logger, Client: &http.Client{}}
	sender.Run(ctx, webhookEvery)
}
