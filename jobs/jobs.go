// Package jobs runs the shop's background work beside the HTTP server: the
// minute's sweep, the payment reconciler, the outbox's relay and the
// webhook sender, each on the services main hands it.
package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/billing"
	"github.com/shop/shop/internal/loop"
	"github.com/shop/shop/orders"
)

// Sweep is the minute's clean-up every instance runs (expired keys and
// sessions, orders left unpaid past OrderExpiry): each order is expired
// once, however many instances run it at once.
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

// Run sweeps every minute until ctx ends.
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

// Reconcile resolves payment attempts left in doubt, at start-up and then
// every interval, so that a charge the provider took is recorded even if
// nobody retries; every == 0 turns it off.
func Reconcile(ctx context.Context, service *billing.Service, every time.Duration, logger *slog.Logger) {
	if every > 0 {
		everyFromNow(ctx, every, func(ctx context.Context) {
			n, err := service.Reconcile(ctx)
			report(ctx, logger, n, err, "reconcile payment attempts", "reconciled payment attempts in doubt", "resolved")
		})
	}
}

// everyFromNow works at once, then every interval until ctx ends.
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
