// Package billing moves the money: it charges and refunds orders through
// one protocol for a provider request in doubt, and resolves those requests.
package billing

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// Config is what a Service is built from.
type Config struct {
	DB       *gorm.DB
	Provider payments.Provider
	// The idempotency middleware's lease and attempt timeout (one resolution's bound).
	Lease, AttemptTimeout time.Duration
	// RollForward is the window in which a request in doubt is sent again;
	// never shorter than an attempt may live (AttemptTimeout + Lease).
	RollForward time.Duration
	// AuthExpiry is how long a charge waiting for the shopper holds its
	// order; AuthPoll how often, at most, a read asks the provider about it.
	AuthExpiry, AuthPoll time.Duration
	// ReturnURL is the order's page, "/orders/{id}" when nil.
	ReturnURL func(orderID string) string
	// The pay form's test cards and provider's name (the simulation's).
	TestCards    []string
	ProviderName string
	// Now is the clock of holds and attempt ages (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Service runs the money workflow. Build it with New.
type Service struct {
	cfg     Config
	shop    Ledger
	orders  orders.Store
	charges flow[models.PaymentAttempt, models.Payment]
	refunds flow[models.Refund, models.Refund]
	// The service's Prometheus series (newMetrics).
	provider, resolutions *prometheus.CounterVec
	inDoubt               *inDoubtCollector
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
	s.newMetrics()
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

// Cancel cancels one of the user's pending orders through tx, while
// nothing can have been charged; a paid one is refunded instead.
func (s *Service) Cancel(tx *gorm.DB, userID, orderID string) (models.Order, error) {
	return paidNotCancellable(s.orders.CancelOrder(tx, userID, orderID, s.now()))
}

// CancelAny is Cancel of any user's pending order, by the staff user by.
func (s *Service) CancelAny(tx *gorm.DB, by models.User, orderID string) (models.Order, error) {
	return paidNotCancellable(s.orders.CancelAnyOrder(tx, by, orderID, s.now()))
}

func paidNotCancellable(order models.Order, err error) (models.Order, error) {
	if errors.Is(err, models.ErrOrderPaid) {
		err = models.ErrPaidNotCancellable
	}
	return order, err
}

// newMetrics builds the service's Prometheus series.
func (s *Service) newMetrics() {
	s.provider = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shop_payment_provider_calls_total", Help: "Payment provider calls by result: succeeded, declined, refused (definitively: nothing charged under the key, ever), unavailable, error.",
	}, []string{"result"})
	s.resolutions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shop_payment_resolutions_total",
		Help: "Payment attempts in doubt resolved, by who asked (payment, reconciler, webhook) and outcome: succeeded, declined, failed (nothing charged), unresolved (the provider could not say), late_charge (a charge reported for an attempt recorded as refused or declined); refunds as refund_succeeded, refund_pending, refund_failed, late_refund (a refund the provider made after the shop recorded it failed) and late_refund_excess (such a refund of a charge already given back in full: recorded excess, for staff).",
	}, []string{"by", "outcome"})
	s.inDoubt = &inDoubtCollector{db: s.cfg.DB, now: s.now,
		count: prometheus.NewDesc("shop_payment_attempts_in_doubt",
			"Payment attempts whose outcome the shop does not know yet.", nil, nil),
		oldest: prometheus.NewDesc("shop_payment_attempt_in_doubt_oldest_age_seconds",
			"Age of the oldest payment attempt in doubt; 0 when there is none.", nil, nil),
	}
}

// Collectors are the service's series.
func (s *Service) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.provider, s.resolutions, s.inDoubt}
}

// inDoubtCollector reads the attempts in doubt from the database at each
// scrape, so that every instance reports the same shared truth.
type inDoubtCollector struct {
	db            *gorm.DB
	now           func() time.Time
	count, oldest *prometheus.Desc
}

// scrapeTimeout bounds the query of one scrape.
const scrapeTimeout = 2 * time.Second

func (c *inDoubtCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.count; ch <- c.oldest }

func (c *inDoubtCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	inDoubt := func() *gorm.DB {
		return c.db.WithContext(ctx).Model(&models.PaymentAttempt{}).Where("state = ?", models.InDoubt)
	}
	var n int64
	var oldest models.PaymentAttempt // the oldest row, not MIN(created_at): SQLite's aggregate loses the type
	err := inDoubt().Count(&n).Error
	if err == nil && n > 0 {
		err = inDoubt().Select("created_at").Order("created_at").Take(&oldest).Error
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.count, err)
		return
	}
	age := 0.0
	if n > 0 {
		age = max(0, c.now().Sub(oldest.CreatedAt).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
