package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/shop/shop/models"
)

// config is the environment, parsed and checked once at start-up.
type config struct {
	Host             string
	Port             int
	DatabaseURL      string
	IdempotencyTTL   time.Duration
	IdempotencyLease time.Duration
	IdempotencyWait  time.Duration
	TokenTTL         time.Duration
	PaymentLatency   time.Duration
	LogLevel         slog.Level
	// LogJSON is LOG_FORMAT=json: one JSON object per line, for collectors.
	LogJSON bool
	// Production is SHOP_ENV=production: a deploy, where SESSION_SECRET is required.
	Production bool
	// SessionSecret signs the browser's session cookies. Empty outside
	// production when SESSION_SECRET is unset: the server then makes a random
	// one at start, and sessions end when it restarts.
	SessionSecret []byte
}

// defaultDatabase is where `go run .` keeps its data when DATABASE_URL is empty.
const defaultDatabase = "data/shop.db"

func loadConfig(getenv func(string) string) (config, error) {
	cfg := config{DatabaseURL: getenv("DATABASE_URL")}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = defaultDatabase
	}
	var errs []error
	if err := models.CheckURL(cfg.DatabaseURL); err != nil {
		errs = append(errs, err)
	}
	port, err := strconv.Atoi(withDefault(getenv("PORT"), "8080"))
	if err != nil || port < 0 || port > 65535 {
		errs = append(errs, fmt.Errorf("PORT=%q: want a port number 0–65535", getenv("PORT")))
	}
	cfg.Port = port
	cfg.Host = strings.TrimSpace(getenv("HOST"))
	if cfg.Host != "" && net.ParseIP(cfg.Host) == nil && cfg.Host != "localhost" {
		errs = append(errs, fmt.Errorf("HOST=%q: want an IP address to listen on, such as 127.0.0.1, or empty for every interface", cfg.Host))
	}
	durations := []struct {
		name, fallback string
		dst            *time.Duration
	}{
		{"IDEMPOTENCY_TTL", "24h", &cfg.IdempotencyTTL},
		{"IDEMPOTENCY_LEASE", "30s", &cfg.IdempotencyLease},
		{"IDEMPOTENCY_WAIT", "5s", &cfg.IdempotencyWait},
		{"TOKEN_TTL", "720h", &cfg.TokenTTL},
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
	if len(errs) == durationErrs && cfg.TokenTTL == 0 {
		errs = append(errs, errors.New("TOKEN_TTL must be positive: a token that expires at once is no token"))
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(withDefault(getenv("LOG_LEVEL"), "info"))); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", getenv("LOG_LEVEL")))
	}
	switch format := withDefault(getenv("LOG_FORMAT"), "text"); format {
	case "text":
	case "json":
		cfg.LogJSON = true
	default:
		errs = append(errs, fmt.Errorf("LOG_FORMAT=%q: want text or json", format))
	}
	switch env := withDefault(getenv("SHOP_ENV"), "development"); env {
	case "development":
	case "production":
		cfg.Production = true
	default:
		errs = append(errs, fmt.Errorf("SHOP_ENV=%q: want development or production", env))
	}
	switch secret := strings.TrimSpace(getenv("SESSION_SECRET")); {
	case secret == "" && cfg.Production:
		errs = append(errs, errors.New("SESSION_SECRET is required when SHOP_ENV=production (make one with: openssl rand -hex 32)"))
	case secret != "" && len(secret) < minSecret:
		errs = append(errs, fmt.Errorf("SESSION_SECRET is %d characters: want at least %d (make one with: openssl rand -hex 32)", len(secret), minSecret))
	case secret != "":
		cfg.SessionSecret = []byte(secret)
	}
	return cfg, oneLine(errs)
}

// oneLine joins the configuration errors into one line, so that start-up
// fails with a single clear message.
func oneLine(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// minSecret is the shortest SESSION_SECRET accepted: 32 characters.
const minSecret = 32

func withDefault(v, fallback string) string {
	if strings.TrimSpace(v) == "" {
		return fallback
	}
	return strings.TrimSpace(v)
}
