// Package handlers is the HTTP surface of the shop: routes, the JSON API and
// the pages documenting its problems. Handlers are methods on Server, which
// gets every dependency from its caller.
package handlers

import (
	"context"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/templates"
)

// Deps is what the server is built from.
type Deps struct {
	DB       *gorm.DB
	Provider payments.Provider
	// TTL, Lease and Wait configure the idempotency middleware.
	TTL, Lease, Wait time.Duration
	// Now is the clock of leases, expiry and payment holds; time.Now when nil.
	Now func() time.Time
	// BcryptCost for new passwords; bcrypt.DefaultCost when zero.
	BcryptCost int
	Logger     *slog.Logger
	// Faults injects failures in tests; nil in production.
	Faults *Faults
}

// Server serves the shop.
type Server struct {
	deps        Deps
	accounts    models.Accounts
	shop        models.Shop
	idempotency *middleware.Idempotency
	pages       *template.Template
	metrics     *metrics
	router      *gin.Engine
}

// Migrate creates or updates every table the server uses.
func Migrate(db *gorm.DB) error {
	return models.Migrate(db, &middleware.IdempotencyKey{}, &payments.SimulatedCharge{})
}

// NewServer builds the server and its routes.
func NewServer(deps Deps) *Server {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.BcryptCost == 0 {
		deps.BcryptCost = bcrypt.DefaultCost
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	s := &Server{
		deps:     deps,
		accounts: models.Accounts{DB: deps.DB, BcryptCost: deps.BcryptCost},
		shop:     models.Shop{DB: deps.DB},
		pages:    template.Must(template.ParseFS(templates.FS, "problems.html")),
		metrics:  newMetrics(),
	}
	s.idempotency = middleware.New(middleware.Config{
		DB: deps.DB, TTL: deps.TTL, Lease: deps.Lease, Wait: deps.Wait, Now: deps.Now,
		Scope:   func(c *gin.Context) string { return currentUser(c).ID },
		Observe: s.metrics.idempotencyOutcome,
		Logger:  deps.Logger,
	})
	s.router = s.routes()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// SweepKeys deletes expired idempotency keys.
func (s *Server) SweepKeys(ctx context.Context) (int64, error) {
	n, err := s.idempotency.Sweep(ctx, 500)
	s.metrics.swept.Add(float64(n))
	return n, err
}

func init() { gin.SetMode(gin.ReleaseMode) }
