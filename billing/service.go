// Package billing moves the money: it charges and refunds orders through
// one protocol for a provider request in doubt, and resolves those requests.
package billing

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// Config is what a Service is built from.
type Config struct {
	DB       *gorm.DB
	Provider payments.Provider
	// Lease is how long a run holds an order before its heartbeat extends
	// the hold; AttemptTimeout bounds one resolution's provider call, so that
	// it never outlives the operation it stands in for: the idempotency
	// middleware's own.
	Lease, AttemptTimeout time.Duration
	// RollForward is the window in which a request in doubt is sent again
	// (which may carry it out); an older one is only looked up, and settled
	// failed if the provider has no record of it. Never shorter than an
	// attempt may live (AttemptTimeout + Lease).
	RollForward time.Duration
	// AuthExpiry is how long a charge that asks the shopper to authenticate
	// holds its order (the provider's own expiry); AuthPoll how often, at
	// most, a read of the order asks the provider about it.
	AuthExpiry, AuthPoll time.Duration
	// ReturnURL is the order's page, where a provider sends the shopper
	// back after an authentication ("/orders/{id}" when nil).
	ReturnURL func(orderID string) string
	// TestCards are the provider's test cards the pay form offers, beside
	// the provider's name for the shopper (the simulation's when empty).
	TestCards    []string
	ProviderName string
	// Now is the clock of holds and attempt ages; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Service runs the money workflow. Build it with New.
type Service struct {
	cfg     Config
	shop    Ledger
	orders  orders.Store
	metrics *metrics
	charges flow[models.PaymentAttempt, models.Payment]
	refunds flow[models.Refund, models.Refund]
}

// New builds the service.
func New(cfg Config) *Service {
	cfg.RollForward = max(cfg.RollForward, cfg.AttemptTimeout+cfg.Lease)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.TestCards) == 0 {
		cfg.TestCards, cfg.ProviderName = payments.SimulatedCards, "the simulated provider"
	}
	if cfg.ReturnURL == nil {
		cfg.ReturnURL = func(orderID string) string { return "/orders/" + orderID }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{cfg: cfg, shop: Ledger{DB: cfg.DB}, orders: orders.Store{DB: cfg.DB}}
	s.metrics = newMetrics(s.shop, s.now)
	s.charges, s.refunds = s.chargeFlow(), s.refundFlow()
	return s
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// releaseHold lets go of the order's hold, whatever became of the request.
func (s *Service) releaseHold(ctx context.Context, orderID, holder string) {
	if err := orders.ReleaseHold(context.WithoutCancel(ctx), s.shop.DB, orderID, holder); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "release an order's hold", "err", err, "order", orderID)
	}
}

// Cancel cancels one of the user's pending orders through tx: only while
// nothing can have been charged — no payment running, none in doubt. A paid
// order is not cancellable: it is refunded instead.
func (s *Service) Cancel(tx *gorm.DB, userID, orderID string) (models.Order, error) {
	return paidNotCancellable(s.orders.CancelOrder(tx, userID, orderID, s.now()))
}

// CancelAny is Cancel of any user's pending order, by the staff user by.
func (s *Service) CancelAny(tx *gorm.DB, by models.User, orderID string) (models.Order, error) {
	return paidNotCancellable(s.orders.CancelAnyOrder(tx, by, orderID, s.now()))
}

// paidNotCancellable tells a paid order's refusal as the cancel's own.
func paidNotCancellable(order models.Order, err error) (models.Order, error) {
	if errors.Is(err, models.ErrOrderPaid) {
		err = models.ErrPaidNotCancellable
	}
	return order, err
}
