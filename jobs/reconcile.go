package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/internal/loop"
)

// Reconcile resolves payment attempts left in doubt, at start-up and then
// every interval, so that a charge the provider took is recorded even if
// nobody retries; every == 0 turns it off.
func Reconcile(ctx context.Context, service *billing.Service, every time.Duration, logger *slog.Logger) {
	if every <= 0 {
		return
	}
	reconcile := func(ctx context.Context) {
		n, err := service.Reconcile(ctx)
		report(ctx, logger, n, err, "reconcile payment attempts", "reconciled payment attempts in doubt", "resolved")
	}
	reconcile(ctx)
	loop.Every(ctx, every, reconcile)
}
