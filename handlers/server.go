// Package handlers is the shop's HTTP layer: each handler decodes a request,
// calls a service and renders the answer as JSON or an HTML page.
//
// Handlers are methods on Server, which gets every dependency from its caller.
package handlers

import (
	"context"
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

// Deps is what the server is built from, by main. A setting's meaning and
// default are config's (config.Config, its env name in parentheses); what
// is said here is only what the server adds.
type Deps struct {
	DB *gorm.DB
	// Payments owns the money workflow: required, built by main (one composition root).
	Payments *billing.Service
	// TTL, Lease and Wait configure the idempotency middleware (IDEMPOTENCY_*).
	TTL, Lease, Wait time.Duration
	// ReplayCacheBytes bounds the middleware's cache of completed answers:
	// middleware.DefaultCacheBytes when zero; no cache when negative.
	ReplayCacheBytes int64
	// PushAnswers: on PostgreSQL, completed answers are pushed to the other
	// instances' caches, signed with a key derived from SessionSecret.
	PushAnswers bool
	// Now is the clock of leases, expiry and payment holds; time.Now when nil.
	Now func() time.Time
	// OrderExpiry (ORDER_EXPIRY), TokenTTL and TokenCacheTTL (zero or
	// negative: no cache) are required: their defaults are config's.
	OrderExpiry      time.Duration
	MaxPendingOrders int // MAX_PENDING_ORDERS; 0: any number
	TokenTTL         time.Duration
	TokenCacheTTL    time.Duration
	// BcryptCost for new passwords, at most bcrypt.MaxCost (golang.org/x/crypto/bcrypt);
	// below bcrypt.MinCost (zero), bcrypt itself uses bcrypt.DefaultCost.
	BcryptCost int
	// SessionSecret (SESSION_SECRET): at least 32 bytes. When empty, a
	// random secret is made, and sessions end when the process does.
	SessionSecret              []byte
	SessionIdle, SessionMaxAge time.Duration
	// SecureCookies marks the session cookie Secure even over plain HTTP:
	// behind a proxy that ends TLS. Production sets it.
	SecureCookies bool
	Logger        *slog.Logger
	// StripeWebhookSecret: when empty, POST /webhooks/stripe is not served.
	StripeWebhookSecret string
	// CredentialsPerMinute, LoginFailures and LoginFailureWindow throttle
	// sign-ups and log-ins (accounts.LoginThrottle); zero: no limit.
	CredentialsPerMinute int
	LoginFailures        int
	LoginFailureWindow   time.Duration
	TrustedProxies       []netip.Prefix
	CORSOrigins          []string // see httpkit.CrossOriginAPI
	// Collectors are the background jobs' series, served on /metrics too.
	Collectors []prometheus.Collector
	// Committed is told, without waiting, when an operation's writes have
	// committed through the idempotency middleware: the outbox's relay wakes.
	Committed    func()
	MetricsToken string
	// Tracer traces each request in a span named by its route; nil or a
	// no-op provider: no tracing (see internal/tracing).
	Tracer trace.TracerProvider
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
	keys := deriveKeys(deps.SessionSecret)
	switch {
	case len(deps.SessionSecret) == 0:
		deps.SessionSecret = securecookie.GenerateRandomKey(64)
	case len(deps.SessionSecret) < 32:
		panic("handlers: Deps.SessionSecret must be at least 32 bytes")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	deps.Logger = slog.New(httpkit.RequestIDs(deps.Logger.Handler()))
	accts, err := accounts.NewAccounts(deps.DB, deps.BcryptCost)
	if err != nil {
		panic(err) // only a bcrypt cost out of range, which Deps documents
	}
	if deps.LoginFailures > 0 {
		accts.Throttle = &accounts.LoginThrottle{Failures: deps.LoginFailures, Window: deps.LoginFailureWindow, Now: deps.Now}
	}
	if deps.TokenCacheTTL > 0 {
		accts.Tokens = accounts.NewTokenCache(deps.TokenCacheTTL)
	}
	s := &Server{
		deps:        deps,
		accounts:    accts,
		shop:        orders.Store{DB: deps.DB, MaxPending: deps.MaxPendingOrders},
		ledger:      billing.Ledger{DB: deps.DB},
		trail:       audit.Trail{DB: deps.DB},
		pages:       mustParsePages(),
		cookies:     newSessionCodec(deps.SessionSecret, deps.SessionMaxAge),
		sessions:    accounts.Sessions{DB: deps.DB, Idle: deps.SessionIdle, MaxAge: deps.SessionMaxAge},
		crossOrigin: http.NewCrossOriginProtection(),
		metrics:     httpkit.NewMetrics(),
	}
	s.idempotency = middleware.New(middleware.Config{
		DB: deps.DB, TTL: deps.TTL, Lease: deps.Lease, Wait: deps.Wait, Now: deps.Now, CacheBytes: deps.ReplayCacheBytes,
		PushAnswers: deps.PushAnswers,
		PushSecret:  keys.push,
		DigestKey:   keys.digest,
		Scope:       scope,
		Refuse:      s.refuse,
		Observe:     s.observe,
		Logger:      deps.Logger,
	})
	s.payments = deps.Payments
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

// Payments is the payments service the server calls, Deps.Payments.
func (s *Server) Payments() *billing.Service { return s.payments }

// scope is who owns an idempotency key: the signed-in user, or Stripe for
// its verified webhook deliveries. User ids are UUIDs, never "stripe".
func scope(c *gin.Context) string {
	if _, ok := c.Get(stripeEventKey); ok {
		return stripeScope
	}
	return currentUser(c).ID
}

func mustParsePages() templates.Pages {
	pages, err := templates.Parse()
	if err != nil {
		panic(err)
	}
	return pages
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Close flushes what the idempotency middleware counted in memory; call it
// once the HTTP server has stopped.
func (s *Server) Close(ctx context.Context) error { return s.idempotency.Close(ctx) }

// ReplayCache reports what the idempotency middleware's replay cache holds.
func (s *Server) ReplayCache() middleware.CacheStats { return s.idempotency.CacheStats() }

// SweepSessions deletes the browser sessions that ran out, idle or past
// their absolute end.
func (s *Server) SweepSessions(ctx context.Context) (int64, error) {
	return s.sessions.Sweep(ctx, s.deps.Now())
}

// SweepKeys deletes expired idempotency keys; the metrics count them by route.
func (s *Server) SweepKeys(ctx context.Context) (int64, error) {
	return s.idempotency.Sweep(ctx, middleware.DefaultSweepBatch)
}

// ExpireOrders cancels the orders left unpaid past the order expiry and
// gives their units back; it returns how many, each expired once.
func (s *Server) ExpireOrders(ctx context.Context) (int, error) {
	now := s.deps.Now()
	return s.shop.ExpireOrders(ctx, now.Add(-s.deps.OrderExpiry), now)
}

// observe counts what the idempotency middleware did, and tells Committed
// of an operation whose writes committed, so that their events leave now.
func (s *Server) observe(route string, outcome middleware.Outcome) {
	s.metrics.IdempotencyOutcome(route, outcome)
	if outcome == middleware.OutcomeStored && s.deps.Committed != nil {
		s.deps.Committed()
	}
}
