package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/outbox"
	"github.com/shop/shop/outbox/publish"
)

// messageConsumers are the consumers the outbox's relay hands every event
// to, built in this one place: the JetStream publisher when NATS_URL is
// set, and the receipts and webhooks (notify.go). closeAll lets go of what they hold, once the relay has stopped.
func messageConsumers(ctx context.Context, cfg config, db *gorm.DB, logger *slog.Logger) (consumers []outbox.Consumer, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, c := range closers {
			c()
		}
	}
	if consumers, err = notifyConsumers(cfg, db, logger); err != nil {
		return nil, closeAll, err
	}
	if cfg.NATSURL != "" {
		js, err := publish.NewJetStream(ctx, cfg.NATSURL, cfg.NATSStream, cfg.NATSPrefix)
		if err != nil {
			return nil, closeAll, err
		}
		consumers, closers = append(consumers, js), append(closers, js.Close)
	}
	return consumers, closeAll, nil
}

// startRelay runs the outbox's relay, in every instance, until the
// returned stop is called or ctx ends; stop waits for it, then closes the
// consumers.
func startRelay(ctx context.Context, cfg config, db *gorm.DB, logger *slog.Logger) (stop func(), err error) {
	consumers, closeAll, err := messageConsumers(ctx, cfg, db, logger)
	if err != nil {
		closeAll()
		return nil, err
	}
	host, _ := os.Hostname()
	relay := outbox.NewRelay(db, consumers, outbox.RelayConfig{
		Interval: cfg.OutboxPollInterval, Lease: cfg.OutboxLease, Logger: logger,
		Holder: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8]),
	})
	ctx, cancel := context.WithCancel(ctx)
	relaying := make(chan struct{})
	go func() { defer close(relaying); relay.Run(ctx) }()
	return func() { cancel(); <-relaying; closeAll() }, nil
}
