package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/internal/loop"
	"github.com/shop/shop/orders"
)

// sweepEvery is how often expired idempotency keys and sessions are
// deleted, and orders left unpaid past their expiry cancelled.
const sweepEvery = time.Minute

// Keys deletes expired idempotency keys. The HTTP server's idempotency
// middleware does, since it counts them by route in its metrics.
type Keys interface {
	SweepKeys(ctx context.Context) (int64, error)
}

// Sweep is the minute's clean-up every instance runs: each order is
// expired once, however many run it at once.
type Sweep struct {
	Keys     Keys
	Sessions accounts.Sessions
	Shop     orders.Store
	// OrderExpiry is how long an order may wait unpaid.
	OrderExpiry time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

// Run sweeps every minute until ctx ends.
func (s Sweep) Run(ctx context.Context) { loop.Every(ctx, sweepEvery, s.once) }

func (s Sweep) once(ctx context.Context) {
	now := s.Now()
	expired, err := s.Shop.ExpireOrders(ctx, now.Add(-s.OrderExpiry), now)
	report(ctx, s.Logger, expired, err, "expire unpaid orders", "expired unpaid orders, their units back in stock", "expired")
	keys, err := s.Keys.SweepKeys(ctx)
	report(ctx, s.Logger, keys, err, "sweep idempotency keys", "swept expired idempotency keys", "deleted")
	sessions, err := s.Sessions.Sweep(ctx, now)
	report(ctx, s.Logger, sessions, err, "sweep sessions", "swept sessions that ran out", "deleted")
}

// report logs what one pass of a job did: its error as failed, unless ctx
// ended (a shutdown cuts the pass short), or its count under done when it
// did anything.
func report[N int | int64](ctx context.Context, logger *slog.Logger, n N, err error, failed, done, count string) {
	if err != nil && ctx.Err() == nil {
		logger.Error(failed, "err", err)
	} else if err == nil && n > 0 {
		logger.Info(done, count, n)
	}
}
