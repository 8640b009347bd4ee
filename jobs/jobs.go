// Package jobs runs the shop's background work beside the HTTP server: the
// minute's sweep, the payment reconciler, the outbox's relay and the
// webhook sender, each on the services main hands it.
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

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/billing"
	"github.com/shop/shop/config"
	"github.com/shop/shop/internal/loop"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/outbox/publish"
)

// Sweep is the minute's clean-up every instance runs: expired keys and
// sessions, and orders left unpaid past OrderExpiry, each expired once.
type Sweep struct {
	// Keys is the idempotency middleware, which counts the keys it deletes by route.
	Keys interface {
		SweepKeys(context.Context) (int64, error)
	}
	Sessions    accounts.Sessions
	Shop        orders.Store
	OrderExpiry time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

func (s Sweep) Run(ctx context.Context) { loop.Every(ctx, time.Minute, s.once) }

func (s Sweep) once(ctx context.Context) {
	now := s.Now()
	expired, err := s.Shop.ExpireOrders(ctx, now.Add(-s.OrderExpiry), now)
	report(ctx, s.Logger, expired, err, "expire unpaid orders", "expired unpaid orders, their units back in stock", "expired")
	keys, err := s.Keys.SweepKeys(ctx)
	report(ctx, s.Logger, keys, err, "sweep idempotency keys", "swept expired idempotency keys", "deleted")
	sessions, err := s.Sessions.Sweep(ctx, now)
	report(ctx, s.Logger, sessions, err, "sweep sessions", "swept sessions that ran out", "deleted")
}

// Reconcile resolves payment attempts left in doubt, at start-up and every
// interval, so that a charge the provider took is recorded; 0 turns it off.
func Reconcile(ctx context.Context, service *billing.Service, every time.Duration, logger *slog.Logger) {
	if every > 0 {
		everyFromNow(ctx, every, func(ctx context.Context) {
			n, err := service.Reconcile(ctx)
			report(ctx, logger, n, err, "reconcile payment attempts", "reconciled payment attempts in doubt", "resolved")
		})
	}
}

func everyFromNow(ctx context.Context, every time.Duration, work func(context.Context)) {
	work(ctx)
	loop.Every(ctx, every, work)
}

// report logs what one pass of a job did: its error, unless ctx ended (a
// shutdown cuts the pass short), or its count when it did anything.
func report[N int | int64](ctx context.Context, logger *slog.Logger, n N, err error, failed, done, count string) {
	if err != nil && ctx.Err() == nil {
		logger.Error(failed, "err", err)
	} else if err == nil && n > 0 {
		logger.Info(done, count, n)
	}
}

// StartRelay runs the outbox's relay, to receipts, webhooks (WEBHOOK_URL) and
// JetStream (NATS_URL), until stop is called or ctx ends; stop waits for it,
// then closes the consumers. The server wakes the relay when it commits.
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
