package config

import (
	"strings"
	"testing"
	"time"
)

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PORT": "eighty"}, "PORT"},
		{map[string]string{"PORT": "70000"}, "PORT"},
		{map[string]string{"IDEMPOTENCY_TTL": "1 day"}, "IDEMPOTENCY_TTL"},
		{map[string]string{"IDEMPOTENCY_WAIT": "-1s"}, "IDEMPOTENCY_WAIT"},
		{map[string]string{"TOKEN_TTL": "a month"}, "TOKEN_TTL"},
		{map[string]string{"TOKEN_TTL": "0s"}, "TOKEN_TTL must be positive"},
		{map[string]string{"TOKEN_CACHE_TTL": "-5s"}, "TOKEN_CACHE_TTL"},
		{map[string]string{"IDEMPOTENCY_CACHE_BYTES": "-1"}, "IDEMPOTENCY_CACHE_BYTES"},
		{map[string]string{"IDEMPOTENCY_CACHE_BYTES": "64MiB"}, "IDEMPOTENCY_CACHE_BYTES"},
		{map[string]string{"TOKEN_CACHE_TTL": "2m"}, "TOKEN_CACHE_TTL (2m0s) must be at most 1m0s"},
		{map[string]string{"IDEMPOTENCY_LEASE": "0s"}, "IDEMPOTENCY_LEASE"},
		{map[string]string{"IDEMPOTENCY_LEASE": "2h", "IDEMPOTENCY_TTL": "1h"}, "IDEMPOTENCY_TTL (1h0m0s) must be at least 5 × IDEMPOTENCY_LEASE (10h0m0s)"},
		// The review's settings: an answer stored already expired.
		{map[string]string{"IDEMPOTENCY_TTL": "3s", "IDEMPOTENCY_LEASE": "1s", "PAYMENT_LATENCY": "3500ms"}, "IDEMPOTENCY_TTL (3s) must be at least 5 × IDEMPOTENCY_LEASE (5s)"},
		{map[string]string{"IDEMPOTENCY_TTL": "2m29s"}, "IDEMPOTENCY_TTL (2m29s) must be at least 5 × IDEMPOTENCY_LEASE (2m30s)"},
		{map[string]string{"PAYMENT_LATENCY": "fast"}, "PAYMENT_LATENCY"},
		{map[string]string{"PAYMENT_RECONCILE_EVERY": "-10s"}, "PAYMENT_RECONCILE_EVERY"},
		{map[string]string{"PAYMENT_ROLL_FORWARD": "30s"}, "PAYMENT_ROLL_FORWARD (30s) must be at least"},
		{map[string]string{"PAYMENT_PROVIDER": "paypal"}, "PAYMENT_PROVIDER"},
		{map[string]string{"PAYMENT_PROVIDER": "stripe"}, "STRIPE_SECRET_KEY is required"},
		{map[string]string{"PAYMENT_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_abc"}, "live key"},
		{map[string]string{"PAYMENT_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "pk_test_abc"}, "secret key"},
		{map[string]string{"PAYMENT_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_abc", "STRIPE_API_BASE": "localhost:12111"}, "STRIPE_API_BASE"},
		{map[string]string{"STRIPE_WEBHOOK_SECRET": "secret"}, "whsec_"},
		{map[string]string{"HTTP_READ_TIMEOUT": "0s"}, "HTTP_READ_TIMEOUT (0s) and HTTP_IDLE_TIMEOUT (1m0s) must be positive"},
		{map[string]string{"HTTP_IDLE_TIMEOUT": "soon"}, "HTTP_IDLE_TIMEOUT"},
		{map[string]string{"CREDENTIALS_PER_MINUTE": "-1"}, "CREDENTIALS_PER_MINUTE"},
		{map[string]string{"LOGIN_FAILURES": "many"}, "LOGIN_FAILURES"},
		{map[string]string{"LOGIN_FAILURE_WINDOW": "0s"}, "LOGIN_FAILURE_WINDOW (0s) must be positive"},
		{map[string]string{"HTTP_WRITE_TIMEOUT": "2m"}, "HTTP_WRITE_TIMEOUT (2m0s) must be at least 4 × IDEMPOTENCY_LEASE + IDEMPOTENCY_WAIT (2m5s)"},
		{map[string]string{"LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{map[string]string{"DATABASE_URL": "mysql://localhost/shop"}, "unknown database scheme"},
		{map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		{map[string]string{"PORT": "x", "IDEMPOTENCY_WAIT": "soon", "SHOP_ENV": "production"}, "SESSION_SECRET is required"},
		{map[string]string{"SHOP_ENV": "prod"}, "SHOP_ENV"},
		{map[string]string{"HOST": "every interface"}, "HOST"},
		{map[string]string{"SHOP_ENV": "production"}, "SESSION_SECRET is required"},
		{map[string]string{"SESSION_SECRET": "short"}, "at least 32"},
	}
	for _, tc := range cases {
		_, err := Load(func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error naming %q", tc.env, err, tc.want)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: the error is not one line: %q", tc.env, err)
		}
	}
	if _, err := Load(func(k string) string { return map[string]string{"IDEMPOTENCY_TTL": "5s", "IDEMPOTENCY_LEASE": "1s"}[k] }); err != nil {
		t.Fatalf("a TTL of exactly 5 leases: %v", err)
	}
	if cfg, _ := Load(func(string) string { return "" }); cfg.TokenTTL != 30*24*time.Hour || cfg.TokenCacheTTL != 5*time.Second {
		t.Fatalf("TOKEN_TTL defaults to %s, want 30 days; TOKEN_CACHE_TTL to %s, want 5s", cfg.TokenTTL, cfg.TokenCacheTTL)
	}
	for value, want := range map[string]time.Duration{"0": 0, "0s": 0, "1m": time.Minute, "250ms": 250 * time.Millisecond} {
		cfg, err := Load(func(k string) string { return map[string]string{"TOKEN_CACHE_TTL": value}[k] })
		if err != nil || cfg.TokenCacheTTL != want {
			t.Fatalf("TOKEN_CACHE_TTL=%s: %s, %v; want %s (0: no cache, as handlers.Deps has it)", value, cfg.TokenCacheTTL, err, want)
		}
	}
	for value, want := range map[string]int64{"": 64 << 20, "1048576": 1 << 20, "0": 0} {
		cfg, err := Load(func(k string) string { return map[string]string{"IDEMPOTENCY_CACHE_BYTES": value}[k] })
		wantDeps := want
		if want == 0 {
			wantDeps = -1 // handlers.Deps: negative is no cache
		}
		if err != nil || cfg.IdempotencyCacheBytes != want || cfg.ReplayCacheBytes() != wantDeps {
			t.Fatalf("IDEMPOTENCY_CACHE_BYTES=%q: %d (Deps %d), %v; want %d, and no cache (negative) for 0", value, cfg.IdempotencyCacheBytes, cfg.ReplayCacheBytes(), err, want)
		}
	}
	cfg, err := Load(func(string) string { return "" })
	if err != nil || cfg.Port != 8080 || cfg.IdempotencyTTL != 24*time.Hour || cfg.IdempotencyLease != 30*time.Second ||
		cfg.IdempotencyWait != 5*time.Second || cfg.PaymentLatency != 50*time.Millisecond || cfg.ReconcileEvery != 10*time.Second || cfg.DatabaseURL != "data/shop.db" ||
		cfg.ReadTimeout != 30*time.Second || cfg.IdleTimeout != time.Minute || cfg.WriteTimeout != 2*time.Minute+35*time.Second ||
		cfg.CredentialsPerMinute != 60 || cfg.LoginFailures != 10 || cfg.LoginFailureWindow != 15*time.Minute {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	if cfg.PaymentProvider != "simulated" {
		t.Fatalf("the default provider is %q, want simulated", cfg.PaymentProvider)
	}
	live := map[string]string{"PAYMENT_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_live_abc", "SHOP_ENV": "production", "SESSION_SECRET": strings.Repeat("s", 32)}
	if cfg, err := Load(func(k string) string { return live[k] }); err != nil || cfg.StripeSecretKey != "sk_live_abc" {
		t.Fatalf("a live key in production: %v", err)
	}
}
