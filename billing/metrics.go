package billing

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus series; the server registers them
// (Collectors) in its registry.
type metrics struct {
	provider    *prometheus.CounterVec
	resolutions *prometheus.CounterVec
	inDoubt     *inDoubtCollector
}

func newMetrics(shop Ledger, now func() time.Time) *metrics {
	return &metrics{
		provider: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_payment_provider_calls_total", Help: "Payment provider calls by result: succeeded, declined, refused (definitively: nothing charged under the key, ever), unavailable, error.",
		}, []string{"result"}),
		resolutions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_payment_resolutions_total",
			Help: "Payment attempts in doubt resolved, by who asked (payment, reconciler, webhook) and outcome: succeeded, declined, failed (nothing charged), unresolved (the provider could not say), late_charge (a charge reported for an attempt recorded as refused or declined); refunds as refund_succeeded, refund_pending, refund_failed, late_refund (a refund the provider made after the shop recorded it failed) and late_refund_excess (such a refund of a charge already given back in full: recorded excess, for staff).",
		}, []string{"by", "outcome"}),
		inDoubt: &inDoubtCollector{
			shop: shop, now: now,
			count: prometheus.NewDesc("shop_payment_attempts_in_doubt",
				"Payment attempts whose outcome the shop does not know yet.", nil, nil),
			oldest: prometheus.NewDesc("shop_payment_attempt_in_doubt_oldest_age_seconds",
				"Age of the oldest payment attempt in doubt; 0 when there is none.", nil, nil),
		},
	}
}

// Collectors are the service's series, for the server's registry.
func (s *Service) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.provider, s.metrics.resolutions, s.metrics.inDoubt}
}

// inDoubtCollector reads the attempts in doubt from the database at each
// scrape, so that every instance reports the same shared truth.
type inDoubtCollector struct {
	shop          Ledger
	now           func() time.Time
	count, oldest *prometheus.Desc
}

// scrapeTimeout bounds the query of one scrape.
const scrapeTimeout = 2 * time.Second

func (c *inDoubtCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.count; ch <- c.oldest }

func (c *inDoubtCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	n, oldest, err := c.shop.AttemptsInDoubt(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.count, err)
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(0, c.now().Sub(oldest).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
