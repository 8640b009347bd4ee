// Command shop serves the shop, the JSON API and the browser checkout whose
// order and money writes run once per Idempotency-Key, on SQLite by default
// or PostgreSQL when DATABASE_URL says so; main only wires.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/joho/godotenv"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/admin"
	"github.com/shop/shop/billing"
	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/internal/tracing"
	"github.com/shop/shop/jobs"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

func main() {
	err := run(context.Background(), os.Args, os.Getenv, os.Stdout)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case err != nil:
		// One line, whatever the error: a log collector keeps it whole.
		fmt.Fprintln(os.Stderr, "shop:", strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(1)
	}
}

// shutdownTimeout is how long requests in flight get to finish, and record their keys.
const shutdownTimeout = 20 * time.Second

// usage is what `shop help` prints, and an unknown argument is answered with.
const usage = `usage: shop [command]

With no command, shop serves the shop. Commands:
` + admin.Usage + `
  help, -h, --help        print this help
  version, --version      print the build's version

Settings come from the environment, or a .env file: each is listed, with
its default, in .env.example, and explained in docs/operations.md.`

// usageError is an argument shop does not know: exit status 2, with the usage.
type usageError string

func (e usageError) Error() string {
	return fmt.Sprintf("shop: unknown argument %q\n%s", string(e), usage)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	command := ""
	if len(args) > 1 {
		command = args[1]
	}
	switch {
	case command == "help" || command == "-h" || command == "-help" || command == "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	case command == "version" || command == "-version" || command == "--version":
		fmt.Fprintln(stdout, version(debug.ReadBuildInfo()))
		return nil
	case command != "" && !admin.Is(command):
		return usageError(command)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := godotenv.Load(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read .env: %w", err)
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if command != "" {
		return admin.Run(ctx, databases(cfg), args[1:], stdout)
	}
	return serve(ctx, stop, cfg, getenv, stdout)
}

// serve serves the shop until ctx ends, with its background jobs beside it.
func serve(ctx context.Context, stop func(), cfg config.Config, getenv func(string) string, stdout io.Writer) error {
	logger := newLogger(cfg, stdout)
	db, closeDB, err := databases(cfg).Prepare()
	if err != nil {
		return err
	}
	defer closeDB()
	tracer, stopTracing, err := tracing.Start(ctx, getenv)
	if err != nil {
		return err
	}
	defer flushTraces(stopTracing, logger)
	if err := tracing.Database(db, tracer); err != nil {
		return err
	}
	service := newBilling(cfg, db, logger, tracer)
	stopRelay, relay, err := jobs.StartRelay(ctx, cfg, db, logger)
	if err != nil {
		return err
	}
	defer stopRelay()
	srv := newServer(cfg, db, service, logger, tracer, relay.Collectors(), relay.Wake)
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	httpServer := &http.Server{Handler: srv, ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout),
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout}
	engine := "sqlite " + cfg.DatabaseURL
	if database.IsPostgres(db) {
		engine = "postgres"
	}
	local := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	logger.Info("shop is serving", "shop", local+"/", "api", local+"/api/v1/products", "policy", local+"/problems",
		"database", engine, "payments", cfg.PaymentProvider)

	// The jobs stop before the database closes.
	sweep := jobs.Sweep{Keys: srv, Sessions: accounts.Sessions{DB: db, Idle: cfg.SessionIdle, MaxAge: cfg.SessionMaxAge},
		Shop: orders.Store{DB: db}, OrderExpiry: cfg.OrderExpiry, Now: time.Now, Logger: logger}
	sweeping, reconciling, webhooking := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(sweeping); sweep.Run(ctx) }()
	go func() { defer close(reconciling); jobs.Reconcile(ctx, service, cfg.ReconcileEvery, logger) }()
	go func() { defer close(webhooking); jobs.SendWebhooks(ctx, cfg, db, logger) }()
	defer func() { stop(); <-sweeping; <-reconciling; <-webhooking }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpServer.Serve(ln) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	stop() // a second signal ends the process at once
	return shutdown(httpServer, srv, logger)
}

func newLogger(cfg config.Config, stdout io.Writer) *slog.Logger {
	var logs slog.Handler = slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel})
	if cfg.LogFormat == "json" {
		logs = slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel})
	}
	return slog.New(httpkit.RequestIDs(logs))
}

// databases opens the database as configured: as it is, or as serving needs it (migrated and seeded).
func databases(cfg config.Config) admin.Databases {
	open := func() (*gorm.DB, error) {
		return database.Open(cfg.DatabaseURL, database.Options{GroupCommit: cfg.GroupCommit})
	}
	return admin.Databases{Open: open, Prepare: func() (*gorm.DB, func(), error) {
		db, err := open()
		if err != nil {
			return nil, nil, err
		}
		closeDB := func() { _ = database.Close(db) }
		if err = database.Migrate(db); err == nil {
			err = orders.Seed(db)
		}
		if err != nil {
			closeDB()
			return nil, nil, err
		}
		return db, closeDB, nil
	}}
}

// newBilling builds the payment provider and the payments service.
func newBilling(cfg config.Config, db *gorm.DB, logger *slog.Logger, tracer trace.TracerProvider) *billing.Service {
	bc := billing.Config{DB: db, Lease: cfg.IdempotencyLease, AttemptTimeout: cfg.AttemptTimeout(), RollForward: cfg.RollForward,
		AuthExpiry: cfg.AuthExpiry, AuthPoll: cfg.AuthPoll, Logger: logger,
		Provider:  &payments.Simulated{DB: db, Latency: cfg.PaymentLatency, AuthExpiry: cfg.AuthExpiry},
		ReturnURL: func(orderID string) string { return cfg.PublicURL + "/orders/" + orderID },
	}
	if cfg.PaymentProvider == "stripe" {
		bc.Provider = payments.NewStripe(payments.StripeConfig{SecretKey: cfg.StripeSecretKey, APIBase: cfg.StripeAPIBase, Tracer: tracer})
		bc.TestCards, bc.ProviderName = payments.StripeCards, "Stripe"
	}
	return billing.New(bc)
}

// newServer builds the HTTP handlers, and warns of the settings left to
// their development defaults.
func newServer(cfg config.Config, db *gorm.DB, service *billing.Service, logger *slog.Logger, tracer trace.TracerProvider, series []prometheus.Collector, committed func()) *handlers.Server {
	srv := handlers.NewServer(handlers.Deps{
		DB: db, Payments: service, Logger: logger, Tracer: tracer, TrustedProxies: cfg.TrustedProxies,
		Collectors: series, Committed: committed, // the relay's gauges, and its wake-up after a commit
		StripeWebhookSecret: cfg.StripeWebhookSecret,
		TTL:                 cfg.IdempotencyTTL, Lease: cfg.IdempotencyLease, Wait: cfg.IdempotencyWait,
		ReplayCacheBytes: cfg.ReplayCacheBytes(),
		PushAnswers:      cfg.SessionSecret != "", // the pushes are signed with a key derived from it
		SessionSecret:    []byte(cfg.SessionSecret), SecureCookies: cfg.Production(),
		CORSOrigins: cfg.CORSOrigins, MetricsToken: cfg.MetricsToken,
		SessionIdle: cfg.SessionIdle, SessionMaxAge: cfg.SessionMaxAge,
		TokenTTL: cfg.TokenTTL, TokenCacheTTL: cfg.TokenCacheTTL,
		OrderExpiry: cfg.OrderExpiry, MaxPendingOrders: cfg.MaxPendingOrders, CredentialsPerMinute: cfg.CredentialsPerMinute,
		LoginFailures: cfg.LoginFailures, LoginFailureWindow: cfg.LoginFailureWindow,
	})
	if cfg.PaymentProvider == "stripe" && cfg.StripeWebhookSecret == "" {
		logger.Warn("STRIPE_WEBHOOK_SECRET is not set, so Stripe's events are not received: a payment Stripe leaves processing, or answers with a 5xx, stays in doubt. Set it to the webhook endpoint's signing secret (whsec_…)")
	}
	if cfg.SessionSecret == "" {
		logger.Warn("SESSION_SECRET is not set: browser sessions end when the server restarts, and instances on one PostgreSQL database do not push their answers to each other (a retry on another instance reads the database). Set it, the same on every instance: openssl rand -hex 32")
	}
	return srv
}

// shutdown lets the requests in flight finish, up to shutdownTimeout, then
// flushes what the server keeps in memory.
func shutdown(httpServer *http.Server, srv *handlers.Server, logger *slog.Logger) error {
	logger.Info("shutting down: finishing requests in flight", "timeout", shutdownTimeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutdownErr := httpServer.Shutdown(shutdownCtx)
	closeErr := srv.Close(shutdownCtx) // the last interval's replay counts, once no request adds to them
	if shutdownErr != nil {
		return fmt.Errorf("shutdown: requests still running after %s were cut off; their keys pass to a retry when their leases end: %w", shutdownTimeout, errors.Join(shutdownErr, closeErr))
	}
	if closeErr == nil {
		logger.Info("shut down: every request answered")
	}
	return closeErr
}

// flushTraces sends the spans not yet exported, for at most five seconds:
// a collector that is down must not hold up the shutdown.
func flushTraces(stop func(context.Context) error, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		logger.Warn("flush traces", "err", err)
	}
}

// version names the build as the Go toolchain stamped it: the module's
// version ("(devel)" from a checkout), VCS revision, its time, and changes.
func version(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "shop: no build information"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	parts := []string{"shop", info.Main.Version}
	if rev := settings["vcs.revision"]; rev != "" {
		parts = append(parts, "revision "+rev)
		if at := settings["vcs.time"]; at != "" {
			parts = append(parts, "of "+at)
		}
		if settings["vcs.modified"] == "true" {
			parts = append(parts, "with uncommitted changes")
		}
	} else {
		parts = append(parts, "(no VCS revision: built with -buildvcs=false or outside a checkout)")
	}
	return strings.Join(append(parts, info.GoVersion), " ")
}
