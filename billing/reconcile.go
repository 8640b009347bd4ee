package billing

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/problem"
)

// reconcileBatch is how many requests of each kind one pass takes on.
const reconcileBatch = 100

// Reconcile resolves the attempts and refunds in doubt that no live
// operation holds, so that what the provider did is recorded even if
// nobody retries, and what it never did lets the order move on. Instances
// may run it at once: each request is resolved under its order's hold. It
// reports how many it resolved.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	ctx = audit.WithActor(ctx, audit.By(audit.ActorReconciler))
	charges, err := s.charges.reconcile(ctx)
	refunds, refundsErr := s.refunds.reconcile(ctx)
	return charges + refunds, errors.Join(err, refundsErr)
}

func (f *flow[R, T]) reconcile(ctx context.Context) (int, error) {
	rows, err := Stale[R](ctx, f.s.shop, f.s.now(), reconcileBatch)
	if err != nil {
		return 0, err
	}
	resolved := 0
	var errs []error
	for _, stale := range rows {
		state, held, err := f.resolveRow(ctx, byReconciler, stale.Base().ID)
		if err != nil {
			errs = append(errs, err)
		} else if held && !state.Open() {
			resolved++
		}
	}
	return resolved, errors.Join(errs...)
}

// resolveRow resolves the row id now, for by, under its order's hold: held
// is false, and nothing asked, when the row is settled or another run
// holds the order. A row still open lets go of the hold afterwards (one
// waiting for the shopper has handed it back to its attempt).
func (f *flow[R, T]) resolveRow(ctx context.Context, by, id string) (state models.State, held bool, err error) {
	holder := orders.NewHolder(by)
	now := f.s.now()
	row, held, err := HoldForResolution[R](ctx, f.s.shop, id, holder, now, now.Add(f.s.cfg.AttemptTimeout+f.s.cfg.Lease))
	if err != nil || !held {
		return "", false, err
	}
	if state, _ = f.resolve(ctx, by, row, holder); state.Open() {
		f.s.releaseHold(ctx, row.Base().OrderID, holder)
	}
	return state, true, nil
}

// ErrNotInDoubt: staff asked the provider about a request that is not in
// doubt (any more), or that another run is resolving now; nothing was asked.
var ErrNotInDoubt = models.Declare(&models.Error{Type: problem.Conflict, Message: "This request is not in doubt, or is being resolved right now: nothing was asked of the provider.",
	Shopper: models.Words{Heading: "Nothing to ask", Text: "This request is no longer in doubt, or is being resolved right now; nothing was asked of the provider."}})

// ResolveNow asks the provider now, as the reconciler would, what became
// of the attempt or refund id (kind orders.DoubtPayment or DoubtRefund),
// for the staff user by (staff in the database: it may send the request
// again); under the order's hold, so two presses ask once. It returns the
// request's state now.
func (s *Service) ResolveNow(ctx context.Context, by models.User, kind, id string) (models.State, error) {
	if err := accounts.StaffNow(s.shop.DB.WithContext(ctx), by.ID); err != nil {
		return "", err
	}
	var state models.State
	var held bool
	var err error
	switch kind {
	case orders.DoubtPayment:
		state, held, err = s.charges.resolveRow(ctx, byStaff, id)
	case orders.DoubtRefund:
		state, held, err = s.refunds.resolveRow(ctx, byStaff, id)
	default:
		return "", models.ErrNotFound
	}
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		err = models.ErrNotFound
	case err == nil && !held:
		err = ErrNotInDoubt
	}
	return state, err
}
