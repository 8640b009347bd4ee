// Package handlers is the shop's HTTP layer: each handler decodes a request,
// calls a service and renders the answer as JSON or an HTML page.
//
// Handlers are methods on Server, which gets every dependency from its caller.
package handlers

import (
	"cmp"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/securecookie"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/audit"
	"github.com/shop/shop/billing"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/templates"
)

// Deps is what main builds the server from; a setting's meaning is config's.
type Deps struct {
	DB       *gorm.DB
	Payments *billing.Service // required: main builds it (one composition root)
	// The idempotency middleware's; ReplayCacheBytes 0: the default, negative: no cache.
	TTL, Lease, Wait time.Duration
	ReplayCacheBytes int64
	PushAnswers      bool
	Now              func() time.Time // of leases, expiry and holds; time.Now when nil
	MaxPendingOrders int              // 0: any number
	BcryptCost       int              // below bcrypt.MinCost, bcrypt's default
	// TokenCacheTTL zero or negative: no cache.
	OrderExpiry, TokenTTL, TokenCacheTTL time.Duration
	// SessionSecret: at least 32 bytes; empty: a random one, sessions end with the process.
	SessionSecret              []byte
	SessionIdle, SessionMaxAge time.Duration
	SecureCookies              bool // Secure even over plain HTTP: behind a proxy that ends TLS
	Logger                     *slog.Logger
	StripeWebhookSecret        string // empty: POST /webhooks/stripe is not served
	// The throttles of sign-ups and log-ins; zero: no limit.
	CredentialsPerMinute, LoginFailures int
	LoginFailureWindow                  time.Duration
	TrustedProxies                      []netip.Prefix
	CORSOrigins                         []string
	Collectors                          []prometheus.Collector // the background jobs' series, served on /metrics too
	// Committed is told, without waiting, of committed writes: the outbox's relay wakes.
	Committed    func()
	MetricsToken string
	Tracer       trace.TracerProvider // nil or a no-op provider: no tracing
}

// Server serves the shop.
type Server struct {
	deps        Deps
	accounts    accounts.Accounts
	shop        orders.Store
	ledger      billing.Ledger
	trail       audit.Trail
	idempotency *middleware.Idempotency
	payments    *billing.Service
	pages       templates.Pages
	cookies     *securecookie.SecureCookie
	sessions    accounts.Sessions
	crossOrigin *http.CrossOriginProtection
	metrics     *httpkit.Metrics
	router      *gin.Engine
	addresses   *accounts.AddressLimit // nil: not throttled
}

// NewServer builds the server and its routes.
func NewServer(deps Deps) *Server {
	gin.SetMode(gin.ReleaseMode) // no debug listing of the routes on start-up
	// Derived before a random session secret is made: no other instance would share it.
	push, digest := deriveKeys(deps.SessionSecret)
	switch {
	case len(deps.SessionSecret) == 0:
		deps.SessionSecret = securecookie.GenerateRandomKey(64)
	case len(deps.SessionSecret) < 32:
		panic("handlers: Deps.SessionSecret must be at least 32 bytes")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	deps.Logger = slog.New(httpkit.RequestIDs(cmp.Or(deps.Logger, slog.Default()).Handler()))
	accts := must(accounts.NewAccounts(deps.DB, deps.BcryptCost))
	if deps.LoginFailures > 0 {
		accts.Throttle = &accounts.LoginThrottle{Failures: deps.LoginFailures, Window: deps.LoginFailureWindow, Now: deps.Now}
	}
	if deps.TokenCacheTTL > 0 {
		accts.Tokens = accounts.NewTokenCache(deps.TokenCacheTTL)
	}
	s := &Server{
		deps:        deps,
		payments:    deps.Payments,
		accounts:    accts,
		shop:        orders.Store{DB: deps.DB, MaxPending: deps.MaxPendingOrders},
		ledger:      billing.Ledger{DB: deps.DB},
		trail:       audit.Trail{DB: deps.DB},
		pages:       must(templates.Parse()),
		cookies:     newSessionCodec(deps.SessionSecret, deps.SessionMaxAge),
		sessions:    accounts.Sessions{DB: deps.DB, Idle: deps.SessionIdle, MaxAge: deps.SessionMaxAge},
		crossOrigin: http.NewCrossOriginProtection(),
		metrics:     httpkit.NewMetrics(),
	}
	s.idempotency = middleware.New(middleware.Config{
		DB: deps.DB, TTL: deps.TTL, Lease: deps.Lease, Wait: deps.Wait, Now: deps.Now, CacheBytes: deps.ReplayCacheBytes,
		PushAnswers: deps.PushAnswers, PushSecret: push, DigestKey: digest,
		Scope: scope, Refuse: s.refuse, Observe: s.observe, ExtendHolds: deps.Payments.ExtendHold, Logger: deps.Logger,
	})
	s.metrics.Registry.MustRegister(s.payments.Collectors()...)
	s.metrics.Registry.MustRegister(pushesRefused(s.idempotency))
	s.metrics.Registry.MustRegister(httpkit.SQLiteCommits(deps.DB)...)
	s.metrics.Registry.MustRegister(deps.Collectors...)
	if deps.CredentialsPerMinute > 0 {
		s.addresses = &accounts.AddressLimit{DB: deps.DB, PerMinute: deps.CredentialsPerMinute, Now: deps.Now}
	}
	s.router = s.routes(s.idempotency.Require(), s.idempotency.RequireAtomic())
	return s
}

func (s *Server) Payments() *billing.Service { return s.payments }

// scope is who owns an idempotency key: the signed-in user, or Stripe for
// its verified webhook deliveries. User ids are UUIDs, never "stripe".
func scope(c *gin.Context) string {
	if _, ok := c.Get(stripeEventKey); ok {
		return stripeScope
	}
	return currentUser(c).ID
}

// must is v, or a panic at start-up: a template, a bcrypt cost, an HKDF key.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Close flushes what the middleware counted in memory, once the HTTP server stopped.
func (s *Server) Close(ctx context.Context) error { return s.idempotency.Close(ctx) }

func (s *Server) ReplayCache() middleware.CacheStats { return s.idempotency.CacheStats() }

// SweepSessions deletes the browser sessions that ran out.
func (s *Server) SweepSessions(ctx context.Context) (int64, error) {
	return s.sessions.Sweep(ctx, s.deps.Now())
}

// SweepKeys deletes expired idempotency keys; the metrics count them by route.
func (s *Server) SweepKeys(ctx context.Context) (int64, error) {
	return s.idempotency.Sweep(ctx, middleware.DefaultSweepBatch)
}

// ExpireOrders cancels the orders unpaid past the expiry; it returns how many.
func (s *Server) ExpireOrders(ctx context.Context) (int, error) {
	now := s.deps.Now()
	return s.shop.ExpireOrders(ctx, now.Add(-s.deps.OrderExpiry), now)
}

// observe counts what the middleware did, and tells Committed of a commit.
func (s *Server) observe(route string, outcome middleware.Outcome) {
	s.metrics.IdempotencyOutcome(route, outcome)
	if outcome == middleware.OutcomeStored && s.deps.Committed != nil {
		s.deps.Committed()
	}
}

// deriveKeys: the session secret, shared by every instance and never in the
// database, yields the keys that sign pushed answers and key the requests'
// hashes (which then tell nothing of passwords); none without a configured one.
func deriveKeys(secret []byte) (push, digest []byte) {
	if len(secret) == 0 {
		return nil, nil
	}
	return derive(secret, "idempotency push", middleware.MinPushSecret), derive(secret, "idempotency digest", middleware.MinDigestKey)
}

func derive(secret []byte, label string, n int) []byte {
	return must(hkdf.Key(sha256.New, secret, nil, label, n))
}

func pushesRefused(mw *middleware.Idempotency) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "shop_idempotency_pushes_refused_total",
		Help: "Answers pushed by other instances and dropped because their signature failed: forged, or sent under another SESSION_SECRET.",
	}, func() float64 { return float64(mw.PushesRefused()) })
}
