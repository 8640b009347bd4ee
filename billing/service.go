// Package billing owns the money: it pays an order, resolves the payment
// attempts left in doubt, reconciles those nobody retries, and applies the
// provider's events. Handlers decode a request, call the Service, and render
// what it returns; nothing else in the shop calls the provider or writes an
// attempt or an order's hold.
//
// The money rule — at most one succeeded charge per order, whatever keys are
// used — rests on the writes of models/payments.go, each fenced by the
// order's hold. One payment, end to end:
//
//  1. Pay: the operation's own payment, if a run of it was settled already.
//  2. models.BeginPayment: the hold and the attempt, committed before the
//     provider is called; or an earlier attempt still in doubt, resolved
//     first (resolve) under its own key.
//  3. Provider.Charge under the attempt's provider key.
//  4. models.Settle through the operation's transaction, which the
//     idempotency middleware commits with the stored answer; or
//     models.FailAttempt on the provider's word that nothing was charged;
//     or, with no answer, the hold let go and the attempt left in doubt for
//     a retry, another payment of the order, the reconciler or a webhook.
//
// The Service runs inside the idempotency middleware as a handler that
// commits outside its transaction (see the middleware's package
// documentation): its attempt is committed, under the order's hold, before
// it calls out, and keyed by the operation's derived key, so that a re-run
// finds it.
package billing

import (
	"context"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// DefaultRollForward is how long after it was made an attempt in doubt may
// still be sent again, and so charged, when Config.RollForward is zero.
const DefaultRollForward = 15 * time.Minute

// Config is what a Service is built from.
type Config struct {
	DB       *gorm.DB
	Provider payments.Provider
	// Lease is how long a run holds an order before its operation's
	// heartbeat extends the hold: the idempotency middleware's lease.
	Lease time.Duration
	// AttemptTimeout bounds one resolution's provider call: the idempotency
	// middleware's attempt timeout (middleware.Config.AttemptTimeout), so
	// that a resolution never outlives the operation it stands in for.
	AttemptTimeout time.Duration
	// RollForward is the roll-forward window: an attempt in doubt is sent
	// again — which may make its charge — only while it is younger than
	// this. An older one is looked up at the provider, and settled as
	// failed if the provider has no record of it. DefaultRollForward when
	// zero; never shorter than an attempt may live (AttemptTimeout + Lease),
	// so that no request under a key looked up is still running.
	RollForward time.Duration
	// Now is the clock of holds and attempt ages; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Service runs the money workflow. Build it with New.
type Service struct {
	cfg     Config
	shop    models.Shop
	metrics *metrics
}

// New builds the service.
func New(cfg Config) *Service {
	if cfg.RollForward == 0 {
		cfg.RollForward = DefaultRollForward
	}
	cfg.RollForward = max(cfg.RollForward, cfg.AttemptTimeout+cfg.Lease)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{cfg: cfg, shop: models.Shop{DB: cfg.DB}}
	s.metrics = newMetrics(s.shop, s.now)
	return s
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// inTx runs fn in a transaction of its own, which a client that leaves
// cannot cancel: what the provider said is recorded whatever the caller does.
func (s *Service) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.cfg.DB.WithContext(context.WithoutCancel(ctx)).Transaction(fn)
}

// releaseHold lets go of the order's hold, whatever became of the request.
func (s *Service) releaseHold(ctx context.Context, orderID, holder string) {
	if err := s.shop.ReleaseHold(context.WithoutCancel(ctx), orderID, holder); err != nil {
		s.cfg.Logger.Error("release an order's hold", "err", err, "order", orderID)
	}
}

func chargeRequest(a models.PaymentAttempt) payments.ChargeRequest {
	return payments.ChargeRequest{
		IdempotencyKey: a.ProviderKey, OrderID: a.OrderID, AmountCents: a.AmountCents, Currency: a.Currency, PaymentMethod: a.PaymentMethod,
	}
}

func outcomeOf(charge payments.Charge) models.Outcome {
	return models.Outcome{Status: charge.Status, ChargeID: charge.ID, DeclineReason: charge.DeclineReason}
}
