package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
)

// TestRun starts the real program on a free port with a fresh SQLite file,
// waits for /healthz, reads the seeded catalog, and shuts it down.
func TestRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	env := map[string]string{
		"HOST":         "127.0.0.1",
		"PORT":         port,
		"DATABASE_URL": filepath.Join(t.TempDir(), "data", "shop.db"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out testkit.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, &out) }()

	base := "http://127.0.0.1:" + port
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not healthy in time\n%s", out.String())
		}
	}
	for _, path := range []string{"/readyz", "/api/v1/products"} {
		resp, err := http.Get(base + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", path, resp, err)
		}
		if path == "/api/v1/products" {
			var catalog struct{ Products []map[string]any }
			if err := json.NewDecoder(resp.Body).Decode(&catalog); err != nil || len(catalog.Products) != 6 {
				t.Fatalf("catalog: %v %v", catalog, err)
			}
		}
		resp.Body.Close()
	}
	if !strings.Contains(out.String(), "http://localhost:"+port+"/api/v1/products") {
		t.Fatalf("the log does not say where to go:\n%s", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

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
		{map[string]string{"IDEMPOTENCY_LEASE": "0s"}, "IDEMPOTENCY_LEASE"},
		{map[string]string{"IDEMPOTENCY_LEASE": "2h", "IDEMPOTENCY_TTL": "1h"}, "shorter than IDEMPOTENCY_TTL"},
		{map[string]string{"PAYMENT_LATENCY": "fast"}, "PAYMENT_LATENCY"},
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
		err := run(context.Background(), nil, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error naming %q", tc.env, err, tc.want)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: the error is not one line: %q", tc.env, err)
		}
	}
	if cfg, _ := loadConfig(func(string) string { return "" }); cfg.TokenTTL != 30*24*time.Hour {
		t.Fatalf("TOKEN_TTL defaults to %s, want 30 days", cfg.TokenTTL)
	}
	cfg, err := loadConfig(func(string) string { return "" })
	if err != nil || cfg.Port != 8080 || cfg.IdempotencyTTL != 24*time.Hour || cfg.IdempotencyLease != 30*time.Second ||
		cfg.IdempotencyWait != 5*time.Second || cfg.PaymentLatency != 50*time.Millisecond || cfg.DatabaseURL != "data/shop.db" {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
}
