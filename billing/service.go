// Package billing moves the money: it charges and refunds orders through
// one protocol for a provider request in doubt, and resolves those requests.
package billing

import (
	"context"
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
	// failed if the provider has no record of it (PAYMENT_ROLL_FORWARD);
	// never shorter than an attempt may live (AttemptTimeout + Lease),
	// so that no request under a key looked up is still running.
	RollForward time.Duration
	// AuthExpiry is how long a charge that asks the shopper to
	// authenticate holds its order (PAYMENT_AUTH_EXPIRY):
	// the provider's own expiry of the authentication.
	AuthExpiry time.Duration
	// AuthPoll is how often, at most, a read of an order asks the provider
	// about its attempt that waits for the shopper (PAYMENT_AUTH_POLL).
	AuthPoll time.Duration
	// ReturnURL is the page a provider sends the shopper back to after an
	// authentication: the order's page. "/orders/{id}" when nil.
	ReturnURL func(orderID string) string
	// TestCards are the provider's test cards, which the pay form offers,
	// and ProviderName names the provider to the shopper beside them:
	// payments.SimulatedCards and "the simulated provider" when empty.
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

// inTx runs fn in a transaction of its own, which a client that leaves
// cannot cancel: what the provider said is recorded whatever the caller does.
func (s *Service) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.cfg.DB.WithContext(context.WithoutCancel(ctx)).Transaction(fn)
}

// releaseHold lets go of the order's hold, whatever became of the request.
func (s *Service) releaseHold(ctx context.Context, orderID, holder string) {
	if err := orders.ReleaseHold(context.WithoutCancel(ctx), s.shop.DB, orderID, holder); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "release an order's hold", "err", err, "order", orderID)
	}
}
