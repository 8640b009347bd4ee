package handlers

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/billing"
	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// BenchmarkReplayThroughServer: a replayed order through the whole engine, in
// process (no network): request id, access log (JSON, discarded), metrics,
// recovery, security headers, the body check, bearer authentication from the
// token cache, and the middleware's replay from memory. What a replay costs
// the server beyond net/http; compare with middleware's BenchmarkReplay.
func BenchmarkReplayThroughServer(b *testing.B) {
	db := testkit.NewDB(b)
	if err := database.Migrate(db); err != nil {
		b.Fatal(err)
	}
	if err := orders.Seed(db); err != nil {
		b.Fatal(err)
	}
	def := config.Default()
	s := NewServer(Deps{
		DB: db, Payments: billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db}}),
		TTL: def.IdempotencyTTL, ReplayCacheBytes: def.ReplayCacheBytes(), Lease: def.IdempotencyLease, Wait: def.IdempotencyWait,
		TokenTTL: def.TokenTTL, TokenCacheTTL: time.Hour, BcryptCost: bcrypt.MinCost,
		Logger: slog.New(httpkit.RequestIDs(slog.NewJSONHandler(io.Discard, nil))),
	})
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx := context.Background()
	accts := must(accounts.NewAccounts(db, bcrypt.MinCost))
	user := must(accts.SignUp(ctx, "bench@example.com", "correct horse battery"))
	token := must(accts.IssueToken(ctx, user, time.Now().Add(time.Hour)))
	var product models.Product
	if err := db.Where("stock > 100").Take(&product).Error; err != nil {
		b.Fatal(err)
	}
	body := `{"items":[{"product_id":"` + product.ID + `","quantity":1}]}`
	serve := func(want int) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "bench-replay")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != want {
			b.Fatalf("status %d, want %d: %s", w.Code, want, w.Body)
		}
	}
	serve(http.StatusCreated)
	b.ReportAllocs()
	before := cpuTime(b)
	for b.Loop() {
		serve(http.StatusCreated)
	}
	// CPU time, GC included, is steadier than ns/op on a machine shared with other work.
	b.ReportMetric(float64((cpuTime(b)-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
