package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/config"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/outbox/publish"
)

// StartRelay runs the outbox's relay, in every instance, until stop is
// called or ctx ends; stop waits for it, then closes the consumers. The
// consumers are built here, once: the receipt email always (by SMTP, or .eml
// files), the merchant's webhooks with a WEBHOOK_URL, the JetStream
// publisher with a NATS_URL. The relay is for /metrics and for the server,
// which wakes it when it commits.
func StartRelay(ctx context.Context, cfg config.Config, db *gorm.DB, logger *slog.Logger) (stop func(), relay *outbox.Relay, err error) {
	mailer, err := notify.NewMailer(cfg.SMTPURL, cfg.MailDir)
	if err != nil {
		return nil, nil, err
	}
	domain := "localhost"
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		domain = u.Hostname()
	}
	all := []outbox.Consumer{notify.Receipts{Logger: logger, Mailer: mailer, From: cfg.MailFrom, Domain: domain, PublicURL: cfg.PublicURL}}
	if cfg.WebhookURL != "" {
		all = append(all, notify.Webhooks{})
	}
	closeAll := func() {}
	if cfg.NATSURL != "" {
		js, err := publish.NewJetStream(ctx, cfg.NATSURL, cfg.NATSStream, cfg.NATSPrefix)
		if err != nil {
			return nil, nil, err
		}
		all, closeAll = append(all, js), js.Close
	}
	host, _ := os.Hostname()
	relay = outbox.NewRelay(db, all, outbox.RelayConfig{
		Interval: cfg.OutboxPollInterval, Lease: cfg.OutboxLease, MaxAttempts: cfg.OutboxMaxAttempts, Logger: logger,
		Holder: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8]),
	})
	ctx, cancel := context.WithCancel(ctx)
	relaying := make(chan struct{})
	go func() { defer close(relaying); relay.Run(ctx) }()
	return func() { cancel(); <-relaying; closeAll() }, relay, nil
}

// SendWebhooks posts the deliveries due, every second, until ctx ends;
// nothing without a WEBHOOK_URL.
func SendWebhooks(ctx context.Context, cfg config.Config, db *gorm.DB, logger *slog.Logger) {
	if cfg.WebhookURL == "" {
		return
	}
	sender := &notify.Sender{DB: db, URL: cfg.WebhookURL, Key: cfg.WebhookKey, MaxAttempts: cfg.WebhookMaxAttempts,
		Timeout: cfg.WebhookTimeout, Backoff: cfg.WebhookBackoff, MaxBackoff: cfg.WebhookMaxBackoff,
		Logger: logger, Client: &http.Client{}, Now: time.Now}
	everyFromNow(ctx, time.Second, func(ctx context.Context) {
		if _, err := sender.SendDue(ctx); err != nil && ctx.Err() == nil {
			logger.Error("send webhooks", "err", err)
		}
	})
}
