package httpkit

import (
	"crypto/subtle"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gorm.io/gorm"

	"github.com/shop/shop/database"
	"github.com/shop/shop/middleware"
)

// Metrics are the server's Prometheus series, in a registry of its own.
type Metrics struct {
	Registry    *prometheus.Registry
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	idempotency *prometheus.CounterVec
	// A request's labels to its two series, and a route's outcome to its
	// count: no label is hashed per request.
	series, outcomes sync.Map
}

func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "shop_http_request_duration_seconds", Help: "HTTP request latency by route, method and status.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method", "status"}),
		idempotency: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shop_idempotency_outcomes_total",
			Help: "What the idempotency middleware did, by route: claimed, replayed, waited_replayed, mismatch, in_progress_conflict, taken_over, released, stored, lease_lost, swept.",
		}, []string{"route", "outcome"}),
	}
	m.Registry.MustRegister(m.requests, m.latency, m.idempotency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Observe counts every request by its route template, never its raw path,
// so that ids do not explode the series.
func (m *Metrics) Observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	type labels struct {
		route, method string
		status        int
	}
	type series struct {
		prometheus.Counter
		prometheus.Observer
	}
	l := labels{Route(c), methodLabel(c.Request.Method), c.Writer.Status()}
	s, ok := m.series.Load(l)
	if !ok {
		status := strconv.Itoa(l.status)
		s, _ = m.series.LoadOrStore(l, series{m.requests.WithLabelValues(l.route, l.method, status), m.latency.WithLabelValues(l.route, l.method, status)})
	}
	s.(series).Inc()
	s.(series).Observe(time.Since(start).Seconds())
}

// methodLabel is "other" for a method a client makes up, so that made-up
// methods cannot grow the series without limit.
func methodLabel(method string) string {
	if slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace}, method) {
		return method
	}
	return "other"
}

// IdempotencyOutcome counts what the idempotency middleware did.
func (m *Metrics) IdempotencyOutcome(route string, outcome middleware.Outcome) {
	l := [2]string{route, string(outcome)}
	c, ok := m.outcomes.Load(l)
	if !ok {
		c, _ = m.outcomes.LoadOrStore(l, m.idempotency.WithLabelValues(l[0], l[1]))
	}
	c.(prometheus.Counter).Inc()
}

// Handler serves the series to a loopback client (c.ClientIP()), and to any
// other only with Authorization: Bearer token: they count money and routes.
func (m *Metrics) Handler(token string) gin.HandlerFunc {
	serve := gin.WrapH(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	want := []byte("Bearer " + token)
	return func(c *gin.Context) {
		ip, err := netip.ParseAddr(c.ClientIP())
		sent := []byte(c.GetHeader("Authorization"))
		if (err == nil && ip.Unmap().IsLoopback()) || (token != "" && subtle.ConstantTimeCompare(sent, want) == 1) {
			serve(c)
			return
		}
		c.AbortWithStatus(http.StatusUnauthorized)
	}
}

// SQLiteCommits count SQLite's COMMITs and the transactions in them: their
// ratio is how many orders share an fsync. Both stay 0 on PostgreSQL.
func SQLiteCommits(db *gorm.DB) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shop_sqlite_commits_total",
			Help: "COMMITs SQLite's writer issued, each shared by the transactions batched in it (SQLITE_GROUP_COMMIT)."},
			func() float64 { commits, _ := database.CommitStats(db); return float64(commits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shop_sqlite_committed_operations_total",
			Help: "Transactions committed in SQLite's shared COMMITs."},
			func() float64 { _, operations := database.CommitStats(db); return float64(operations) }),
	}
}

// Route is the request's route template, "unmatched" for none.
func Route(c *gin.Context) string {
	if route := c.FullPath(); route != "" {
		return route
	}
	return "unmatched"
}
