package billing

import (
	"context"
	"errors"

	"github.com/shop/shop/models"
)

// reconcileBatch is how many requests in doubt one reconcile pass takes on,
// of each kind.
const reconcileBatch = 100

// Reconcile resolves the payment attempts and refunds in doubt that no live
// operation holds, so that a charge or a refund the provider made is
// recorded, and its order paid or given back, even if nobody retries — and
// one the provider refused, or never received, is settled, so that its order
// can move on. Any number of instances may run it at once: each request is
// resolved under its order's hold, which one of them gets. It reports how
// many it resolved.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	ctx = models.WithActor(ctx, models.By(models.ActorReconciler))
	charges, err := s.charges.reconcile(ctx)
	refunds, refundsErr := s.refunds.reconcile(ctx)
	return charges + refunds, errors.Join(err, refundsErr)
}

func (f *flow[R, T]) reconcile(ctx context.Context) (int, error) {
	rows, err := models.Stale[R](ctx, f.s.shop, f.s.now(), reconcileBatch)
	if err != nil {
		return 0, err
	}
	resolved := 0
	var errs []error
	for _, stale := range rows {
		holder := models.NewHolder(byReconciler)
		now := f.s.now()
		// Held for as long as the resolution's provider call may take.
		row, held, err := models.HoldForResolution[R](ctx, f.s.shop, stale.Base().ID, holder, now, now.Add(f.s.cfg.AttemptTimeout+f.s.cfg.Lease))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !held {
			continue // resolved meanwhile, or taken by a live operation or another reconciler
		}
		if state, _ := f.resolve(ctx, byReconciler, row, holder); !state.Open() {
			resolved++
		} else {
			// Let go; or, still waiting for the shopper, already handed
			// back to the attempt.
			f.s.releaseHold(ctx, row.Base().OrderID, holder)
		}
	}
	return resolved, errors.Join(errs...)
}
