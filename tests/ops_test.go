package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/handlers"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/payments"
)

// gated holds every provider call until it is opened, and says when a call
// has arrived. Cleanup opens it, so that a failed test does not leave the
// server waiting.
type gated struct {
	payments.Provider
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func withGate(t *testing.T) (option, *gated) {
	g := &gated{entered: make(chan struct{}, 10), open: make(chan struct{})}
	return withProvider(func(p payments.Provider) payments.Provider { g.Provider = p; return g }), g
}

func (g *gated) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	g.entered <- struct{}{}
	<-g.open
	return g.Provider.Charge(ctx, req)
}

func (g *gated) release() { g.once.Do(func() { close(g.open) }) }

// onWaiting reports on the channel it returns when a request reads an
// idempotency key and finds it in progress: that request is then waiting.
func onWaiting(t *testing.T, db *gorm.DB) <-chan struct{} {
	waiting := make(chan struct{}, 1)
	err := db.Callback().Query().After("gorm:query").Register("test:waiting", func(tx *gorm.DB) {
		rows, ok := tx.Statement.Dest.(*[]middleware.IdempotencyKey)
		if ok && len(*rows) == 1 && (*rows)[0].State == middleware.StateInProgress {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return waiting
}

// ownServer replaces the env's server by one the test holds, for what HTTP
// does not reach (the sweeper).
func (e *env) ownServer() *handlers.Server {
	srv := handlers.NewServer(e.deps)
	ts := httptest.NewServer(srv)
	e.t.Cleanup(ts.Close)
	e.url = ts.URL
	return srv
}

func (e *env) metrics() string {
	e.t.Helper()
	r := e.do(request{method: "GET", path: "/metrics"})
	if r.Status != http.StatusOK {
		e.t.Fatalf("/metrics: %d", r.Status)
	}
	return string(r.Body)
}

func wantSeries(t *testing.T, metrics string, series ...string) {
	t.Helper()
	for _, s := range series {
		if !strings.Contains(metrics, s+"\n") {
			t.Errorf("/metrics lacks %s", s)
		}
	}
}

// recv takes the next value of ch; the bound only turns a hang into a failure.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// The outcomes that need a request in flight, or time to pass, are counted
// by route too: a duplicate that waited and replayed, a duplicate refused
// while the original runs, and keys swept after their TTL. Latency is by
// status.
func TestMetricsCountWaitsConflictsAndSweeps(t *testing.T) {
	t.Run("waited then replayed", func(t *testing.T) {
		gate, g := withGate(t)
		e := newEnv(t, gate)
		t.Cleanup(g.release)
		waiting := onWaiting(t, e.db)
		token := e.signUp("waiter@example.com")
		orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
		pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

		original := async(e, pay)
		recv(t, g.entered, "the original at the provider")
		duplicate := async(e, pay)
		recv(t, waiting, "the duplicate to wait")
		g.release()
		if r := recv(t, original, "the original"); r.Status != http.StatusCreated || r.replayed() {
			t.Fatalf("original: %d %s", r.Status, r.Body)
		}
		if r := recv(t, duplicate, "the duplicate"); r.Status != http.StatusCreated || !r.replayed() {
			t.Fatalf("duplicate: %d replayed=%v %s", r.Status, r.replayed(), r.Body)
		}
		if c, calls := e.charges(), e.provider.Calls(); c != 1 || calls != 1 {
			t.Fatalf("%d charges, %d provider calls; want 1 each", c, calls)
		}
		wantSeries(t, e.metrics(),
			`shop_idempotency_outcomes_total{outcome="waited_replayed",route="/api/v1/orders/:id/payments"} 1`,
			`shop_http_request_duration_seconds_count{method="POST",route="/api/v1/orders/:id/payments",status="201"} 2`,
		)
	})

	t.Run("in progress conflict", func(t *testing.T) {
		gate, g := withGate(t)
		e := newEnv(t, gate, withWait(0))
		t.Cleanup(g.release)
		token := e.signUp("conflict@example.com")
		orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
		pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

		original := async(e, pay)
		recv(t, g.entered, "the original at the provider")
		isProblem(t, e.do(pay), http.StatusConflict, "/problems/idempotency-key-in-progress")
		g.release()
		if r := recv(t, original, "the original"); r.Status != http.StatusCreated {
			t.Fatalf("original: %d %s", r.Status, r.Body)
		}
		if c, calls := e.charges(), e.provider.Calls(); c != 1 || calls != 1 {
			t.Fatalf("%d charges, %d provider calls; want 1 each", c, calls)
		}
		wantSeries(t, e.metrics(),
			`shop_idempotency_outcomes_total{outcome="in_progress_conflict",route="/api/v1/orders/:id/payments"} 1`,
			`shop_http_request_duration_seconds_count{method="POST",route="/api/v1/orders/:id/payments",status="409"} 1`,
		)
	})

	t.Run("swept", func(t *testing.T) {
		e := newEnv(t)
		srv := e.ownServer()
		token := e.signUp("sweep@example.com")
		orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
		e.do(request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)})
		e.clock.Advance(ttl)
		e.createOrder(token, "fresh", orderBody(e.products()[0], 1))
		if n, err := srv.SweepKeys(context.Background()); err != nil || n != 2 {
			t.Fatalf("SweepKeys = %d, %v; want 2", n, err)
		}
		if keys := e.count("idempotency_keys"); keys != 1 {
			t.Fatalf("%d keys left, want the fresh one", keys)
		}
		wantSeries(t, e.metrics(),
			`shop_idempotency_outcomes_total{outcome="swept",route="/api/v1/orders"} 1`,
			`shop_idempotency_outcomes_total{outcome="swept",route="/api/v1/orders/:id/payments"} 1`,
		)
	})
}

func async(e *env, r request) <-chan response {
	done := make(chan response, 1)
	go func() {
		resp, err := e.send(r)
		if err != nil {
			e.t.Error(err)
		}
		done <- resp
	}()
	return done
}
