// Command shop serves the shop: a JSON API whose writes are idempotent, on
// SQLite by default or PostgreSQL when DATABASE_URL says so.
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/joho/godotenv"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/internal/tracing"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

func main() {
	if err := run(context.Background(), os.Args, os.Getenv, os.Stdout); err != nil {
		// One line, whatever the error: a log collector keeps it whole.
		fmt.Fprintln(os.Stderr, "shop:", strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(1)
	}
}

// sweepEvery is how often expired idempotency keys are deleted, and orders
// left unpaid past ORDER_EXPIRY cancelled.
const sweepEvery = time.Minute

// shutdownTimeout is how long requests in flight get to finish, and record
// their keys, once a shutdown begins.
const shutdownTimeout = 20 * time.Second

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if slices.Contains(args, "-version") {
		fmt.Fprintln(stdout, version(debug.ReadBuildInfo()))
		return nil
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A .env file, if present, fills in what the environment leaves unset.
	if err := godotenv.Load(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read .env: %w", err)
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if len(args) > 1 {
		switch args[1] {
		case "migrate":
			return migrateCommand(ctx, cfg.DatabaseURL, args[2:], stdout)
		case "stock":
			return stockCommand(ctx, cfg, args[2:], stdout)
		case "staff":
			return staffCommand(ctx, cfg.DatabaseURL, args[2:], stdout)
		}
	}
	logger := newLogger(cfg, stdout)
	db, closeDB, err := openDatabase(cfg)
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
	srv := newServer(cfg, db, logger, tracer)
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
	port := ln.Addr().(*net.TCPAddr).Port
	logger.Info("shop is serving", "shop", fmt.Sprintf("http://localhost:%d/", port),
		"api", fmt.Sprintf("http://localhost:%d/api/v1/products", port),
		"policy", fmt.Sprintf("http://localhost:%d/problems", port), "database", engine, "payments", cfg.PaymentProvider)

	// The sweeper and the reconciler stop before the database closes.
	sweeping, reconciling := make(chan struct{}), make(chan struct{})
	go func() { defer close(sweeping); sweep(ctx, srv, logger) }()
	go func() { defer close(reconciling); reconcile(ctx, srv.Payments(), cfg.ReconcileEvery, logger) }()
	webhooking := make(chan struct{})
	go func() { defer close(webhooking); sendWebhooks(ctx, cfg, db, logger) }()
	defer func() { stop(); <-sweeping; <-reconciling; <-webhooking }()
	stopRelay, err := startRelay(ctx, cfg, db, logger)
	if err != nil {
		return err
	}
	defer stopRelay()
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

func newLogger(cfg config, stdout io.Writer) *slog.Logger {
	var logs slog.Handler = slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel})
	if cfg.LogJSON {
		logs = slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel})
	}
	return slog.New(handlers.RequestIDs(logs))
}

// openDatabase opens the database, migrates and seeds it; the returned
// function closes it.
func openDatabase(cfg config) (*gorm.DB, func(), error) {
	db, err := database.OpenWith(cfg.DatabaseURL, database.Options{GroupCommit: cfg.GroupCommit})
	if err != nil {
		return nil, nil, err
	}
	closeDB := func() { _ = database.Close(db) }
	if err := database.Migrate(db); err != nil {
		closeDB()
		return nil, nil, err
	}
	if err := orders.Seed(db); err != nil {
		closeDB()
		return nil, nil, err
	}
	return db, closeDB, nil
}

// newServer builds the payment provider and the HTTP handlers, and warns
// of the settings left to their development defaults.
func newServer(cfg config, db *gorm.DB, logger *slog.Logger, tracer trace.TracerProvider) *handlers.Server {
	var provider payments.Provider = &payments.Simulated{DB: db, Latency: cfg.PaymentLatency, AuthExpiry: cfg.AuthExpiry}
	var cards []string
	var providerName string
	if cfg.PaymentProvider == "stripe" {
		provider = payments.NewStripe(payments.StripeConfig{SecretKey: cfg.StripeSecretKey, APIBase: cfg.StripeAPIBase, Tracer: tracer})
		cards, providerName = payments.StripeCards, "Stripe"
	}
	service := billing.New(billing.Config{
		DB: db, Provider: provider, Lease: cfg.IdempotencyLease, AttemptTimeout: cfg.attemptTimeout(),
		RollForward: cfg.RollForward, AuthExpiry: cfg.AuthExpiry, TestCards: cards, ProviderName: providerName, Logger: logger,
		ReturnURL: func(orderID string) string { return cfg.PublicURL + "/orders/" + orderID },
	})
	srv := handlers.NewServer(handlers.Deps{
		DB:                  db,
		Payments:            service,
		StripeWebhookSecret: cfg.StripeWebhookSecret,
		TTL:                 cfg.IdempotencyTTL, Lease: cfg.IdempotencyLease, Wait: cfg.IdempotencyWait,
		ReplayCacheBytes:     cacheBytes(cfg.IdempotencyCacheBytes),
		PushAnswers:          true,
		SessionSecret:        cfg.SessionSecret,
		SecureCookies:        cfg.Production,
		CORSOrigins:          cfg.CORSOrigins,
		SessionIdle:          cfg.SessionIdle,
		SessionMaxAge:        cfg.SessionMaxAge,
		Logger:               logger,
		TokenTTL:             cfg.TokenTTL,
		TokenCacheTTL:        cfg.TokenCacheTTL,
		OrderExpiry:          cfg.OrderExpiry,
		CredentialsPerMinute: cfg.CredentialsPerMinute,
		LoginFailures:        cfg.LoginFailures, LoginFailureWindow: cfg.LoginFailureWindow,
		Tracer:         tracer,
		TrustedProxies: cfg.TrustedProxies,
	})
	if cfg.PaymentProvider == "stripe" && cfg.StripeWebhookSecret == "" {
		logger.Warn("STRIPE_WEBHOOK_SECRET is not set: a payment Stripe leaves processing or answers with a 5xx stays in doubt until a webhook settles it")
	}
	if cfg.SessionSecret == nil {
		logger.Warn("SESSION_SECRET is not set: using a random one, so browser sessions end when the server restarts")
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
	// The replay counts of the last interval, once no request adds to them.
	closeErr := srv.Close(shutdownCtx)
	if shutdownErr != nil {
		return fmt.Errorf("shutdown: requests still running after %s were cut off; their keys pass to a retry when their leases end: %w", shutdownTimeout, errors.Join(shutdownErr, closeErr))
	}
	if closeErr != nil {
		return closeErr
	}
	logger.Info("shut down: every request answered")
	return nil
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

// reconcile resolves payment attempts left in doubt, at start-up and then
// every interval, so that a charge the provider took is recorded even if
// nobody retries; every == 0 turns it off.
func reconcile(ctx context.Context, service *billing.Service, every time.Duration, logger *slog.Logger) {
	if every <= 0 {
		return
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		if n, err := service.Reconcile(ctx); err != nil && ctx.Err() == nil {
			logger.Error("reconcile payment attempts", "err", err)
		} else if n > 0 {
			logger.Info("reconciled payment attempts in doubt", "resolved", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func sweep(ctx context.Context, srv *handlers.Server, logger *slog.Logger) {
	ticker := time.NewTicker(sweepEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			expireOrders(ctx, srv, logger)
			if n, err := srv.SweepKeys(ctx); err != nil {
				logger.Error("sweep idempotency keys", "err", err)
			} else if n > 0 {
				logger.Info("swept expired idempotency keys", "deleted", n)
			}
			if n, err := srv.SweepSessions(ctx); err != nil {
				logger.Error("sweep sessions", "err", err)
			} else if n > 0 {
				logger.Info("swept sessions that ran out", "deleted", n)
			}
		}
	}
}

// cacheBytes maps IDEMPOTENCY_CACHE_BYTES, where 0 turns the cache off, to
// Deps.ReplayCacheBytes, where zero is the default and negative is off.
func cacheBytes(setting int64) int64 {
	if setting == 0 {
		return -1
	}
	return setting
}
