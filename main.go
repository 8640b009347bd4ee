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
	"strconv"
	"syscall"
	"time"

	"github.com/joho/godotenv"

	"github.com/shop/shop/handlers"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

func main() {
	// A .env file, if present, fills in what the environment leaves unset.
	if err := godotenv.Load(); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "shop: read .env:", err)
		os.Exit(1)
	}
	if err := run(context.Background(), os.Args, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

// sweepEvery is how often expired idempotency keys are deleted.
const sweepEvery = time.Minute

func run(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := loadConfig(getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))

	db, err := models.Open(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	if err := handlers.Migrate(db); err != nil {
		return err
	}
	if err := models.Seed(db); err != nil {
		return err
	}

	srv := handlers.NewServer(handlers.Deps{
		DB:       db,
		Provider: &payments.Simulated{DB: db, Latency: cfg.PaymentLatency},
		TTL:      cfg.IdempotencyTTL, Lease: cfg.IdempotencyLease, Wait: cfg.IdempotencyWait,
		Logger: logger,
	})
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	httpServer := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	database := "sqlite " + cfg.DatabaseURL
	if models.IsPostgres(db) {
		database = "postgres"
	}
	port := ln.Addr().(*net.TCPAddr).Port
	logger.Info("shop is serving", "api", fmt.Sprintf("http://localhost:%d/api/v1/products", port),
		"policy", fmt.Sprintf("http://localhost:%d/problems", port), "database", database)

	go sweep(ctx, srv, logger)
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpServer.Serve(ln) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = httpServer.Shutdown(shutdownCtx)
	// The replay counts of the last interval, once no request adds to them.
	return errors.Join(err, srv.Close(shutdownCtx))
}

func sweep(ctx context.Context, srv *handlers.Server, logger *slog.Logger) {
	ticker := time.NewTicker(sweepEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if n, err := srv.SweepKeys(ctx); err != nil {
				logger.Error("sweep idempotency keys", "err", err)
			} else if n > 0 {
				logger.Info("swept expired idempotency keys", "deleted", n)
			}
		}
	}
}
