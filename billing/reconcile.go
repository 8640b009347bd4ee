package billing

import (
	"context"
	"errors"

	"github.com/shop/shop/models"
)

// reconcileBatch is how many attempts in doubt one reconcile pass takes on.
const reconcileBatch = 100

// Reconcile resolves the payment attempts and refunds in doubt that no live operation
// holds, so that a charge the provider took is recorded, and its order
// paid, even if nobody retries — and an attempt the provider refused, or
// never received, is settled, so that its order can be paid. Any number of
// instances may run it at once: each attempt is resolved under its order's
// hold, which one of them gets. It reports how many it resolved.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	attempts, err := s.shop.StaleAttempts(ctx, s.now(), reconcileBatch)
	if err != nil {
		return 0, err
	}
	resolved := 0
	var errs []error
	for _, a := range attempts {
		holder := models.NewHolder(byReconciler)
		now := s.now()
		// Held for as long as the resolution's provider call may take.
		attempt, held, err := s.shop.HoldForResolution(ctx, a.ID, holder, now, now.Add(s.cfg.AttemptTimeout+s.cfg.Lease))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !held {
			continue // resolved meanwhile, or taken by a live operation or another reconciler
		}
		if r := s.resolve(ctx, byReconciler, attempt, holder); r.state != models.AttemptInDoubt {
			resolved++
		} else {
			s.releaseHold(ctx, attempt.OrderID, holder)
		}
	}
	refunds, err := s.reconcileRefunds(ctx)
	return resolved + refunds, errors.Join(append(errs, err)...)
}

// reconcileRefunds resolves the refunds in doubt that no live operation
// holds, as Reconcile does the payment attempts.
func (s *Service) reconcileRefunds(ctx context.Context) (int, error) {
	refunds, err := s.shop.StaleRefunds(ctx, s.now(), reconcileBatch)
	if err != nil {
		return 0, err
	}
	resolved := 0
	var errs []error
	for _, r := range refunds {
		holder := models.NewHolder(byReconciler)
		now := s.now()
		refund, held, err := s.shop.HoldRefundForResolution(ctx, r.ID, holder, now, now.Add(s.cfg.AttemptTimeout+s.cfg.Lease))
		if err != nil || !held {
			errs = append(errs, err)
			continue
		}
		if s.resolveRefund(ctx, byReconciler, refund, holder).State != models.RefundInDoubt {
			resolved++
		} else {
			s.releaseHold(ctx, refund.OrderID, holder)
		}
	}
	return resolved, errors.Join(errs...)
}
