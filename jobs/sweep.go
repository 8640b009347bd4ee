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
	if n, err := s.Shop.ExpireOrders(ctx, now.Add(-s.OrderExpiry), now); err != nil && ctx.Err() == nil {
		s.Logger.Error("expire unpaid orders", "err", err)
	} else if n > 0 {
		s.Logger.Info("expired unpaid orders, their units back in stock", "expired", n)
	}
	if n, err := s.Keys.SweepKeys(ctx); err != nil {
		s.Logger.Error("sweep idempotency keys", "err", err)
	} else if n > 0 {
		s.Logger.Info("swept expired idempotency keys", "deleted", n)
	}
	if n, err := s.Sessions.Sweep(ctx, now); err != nil {
		s.Logger.Error("sweep sessions", "err", err)
	} else if n > 0 {
		s.Logger.Info("swept sessions that ran out", "deleted", n)
	}
}
