package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// config is the environment, parsed and checked once at start-up.
type config struct {
	Port             int
	DatabaseURL      string
	IdempotencyTTL   time.Duration
	IdempotencyLease time.Duration
	IdempotencyWait  time.Duration
	PaymentLatency   time.Duration
	LogLevel         slog.Level
}

// defaultDatabase is where `go run .` keeps its data when DATABASE_URL is empty.
const defaultDatabase = "data/shop.db"

func loadConfig(getenv func(string) string) (config, error) {
	cfg := config{DatabaseURL: getenv("DATABASE_URL")}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = defaultDatabase
	}
	var errs []error
	port, err := strconv.Atoi(withDefault(getenv("PORT"), "8080"))
	if err != nil || port < 0 || port > 65535 {
		errs = append(errs, fmt.Errorf("PORT=%q: want a port number 0–65535", getenv("PORT")))
	}
	cfg.Port = port
	durations := []struct {
		name, fallback string
		dst            *time.Duration
	}{
		{"IDEMPOTENCY_TTL", "24h", &cfg.IdempotencyTTL},
		{"IDEMPOTENCY_LEASE", "30s", &cfg.IdempotencyLease},
		{"IDEMPOTENCY_WAIT", "5s", &cfg.IdempotencyWait},
		{"PAYMENT_LATENCY", "50ms", &cfg.PaymentLatency},
	}
	durationErrs := len(errs)
	for _, d := range durations {
		v, err := time.ParseDuration(withDefault(getenv(d.name), d.fallback))
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a non-negative duration such as %s", d.name, getenv(d.name), d.fallback))
			continue
		}
		*d.dst = v
	}
	if len(errs) == durationErrs && (cfg.IdempotencyLease <= 0 || cfg.IdempotencyTTL <= cfg.IdempotencyLease) {
		errs = append(errs, fmt.Errorf("IDEMPOTENCY_LEASE (%s) must be positive and shorter than IDEMPOTENCY_TTL (%s)", cfg.IdempotencyLease, cfg.IdempotencyTTL))
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(withDefault(getenv("LOG_LEVEL"), "info"))); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", getenv("LOG_LEVEL")))
	}
	return cfg, errors.Join(errs...)
}

func withDefault(v, fallback string) string {
	if strings.TrimSpace(v) == "" {
		return fallback
	}
	return strings.TrimSpace(v)
}
