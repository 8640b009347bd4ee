package main

import (
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
	"github.com/shop/shop/orders"
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
			if err := json.NewDecoder(resp.Body).Decode(&catalog); err != nil || len(catalog.Products) != len(orders.Catalog) {
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
