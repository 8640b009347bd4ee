package tests

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/payments"
)

// gated holds each provider call, numbered from 0 as they arrive, until it
// is released, and says on entered when a call has arrived. Tests release
// them all at cleanup (registered after newEnv, so it runs before the
// server closes), so that a failed test does not leave the server waiting.
type gated struct {
	payments.Provider
	entered chan int
	mu      sync.Mutex
	calls   int
	open    [4]chan struct{}
	once    [4]sync.Once
}

func withGate() (option, *gated) {
	g := &gated{entered: make(chan int, len(gated{}.open))}
	for i := range g.open {
		g.open[i] = make(chan struct{})
	}
	return withProvider(func(p payments.Provider) payments.Provider { g.Provider = p; return g }), g
}

func (g *gated) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	g.mu.Lock()
	call := g.calls
	g.calls++
	g.mu.Unlock()
	if call < len(g.open) {
		g.entered <- call
		<-g.open[call]
	}
	return g.Provider.Charge(ctx, req)
}

func (g *gated) release(call int) { g.once[call].Do(func() { close(g.open[call]) }) }

func (g *gated) releaseAll() {
	for i := range g.open {
		g.release(i)
	}
}

// onWaiting reports on the channel it returns when a request reads an
// idempotency key and finds it in progress: that request is then waiting.
// The middleware scans the key row by hand, so this looks at the key just
// after the read; the tests hold the original meanwhile.
func onWaiting(t *testing.T, db *gorm.DB) <-chan struct{} {
	waiting := make(chan struct{}, 1)
	err := db.Callback().Row().After("gorm:row").Register("test:waiting", func(tx *gorm.DB) {
		// The middleware's key read, by its columns (not this callback's own
		// read below, which runs through the same callbacks).
		query := tx.Statement.SQL.String()
		if !strings.HasPrefix(query, `SELECT id, scope, "key", operation_id`) || len(tx.Statement.Vars) != 2 {
			return
		}
		var states []string
		err := tx.Session(&gorm.Session{NewDB: true}).Raw(`SELECT state FROM idempotency_keys WHERE scope = ? AND "key" = ?`, tx.Statement.Vars...).Scan(&states).Error
		if err == nil && len(states) == 1 && states[0] == middleware.KeyInProgress {
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
	srv := newServer(e.t, e.deps)
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

// The outcomes that need a request in flight, or time to pass, are counted
// by route too: a duplicate that waited and replayed, a duplicate refused
// while the original runs, and keys swept after their TTL. Latency is by
// status.
func TestMetricsCountWaitsConflictsAndSweeps(t *testing.T) {
	t.Run("waited then replayed", func(t *testing.T) {
		gate, g := withGate()
		e := newEnv(t, gate)
		t.Cleanup(g.releaseAll)
		waiting := onWaiting(t, e.db)
		token := e.signUp("waiter@example.com")
		orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
		pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

		original := async(e, pay)
		testkit.Recv(t, g.entered, "the original at the provider")
		duplicate := async(e, pay)
		testkit.Recv(t, waiting, "the duplicate to wait")
		g.release(0)
		if r := testkit.Recv(t, original, "the original"); r.Status != http.StatusCreated || r.replayed() {
			t.Fatalf("original: %d %s", r.Status, r.Body)
		}
		if r := testkit.Recv(t, duplicate, "the duplicate"); r.Status != http.StatusCreated || !r.replayed() {
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
		gate, g := withGate()
		e := newEnv(t, gate, withWait(0))
		t.Cleanup(g.releaseAll)
		token := e.signUp("conflict@example.com")
		orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
		pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

		original := async(e, pay)
		testkit.Recv(t, g.entered, "the original at the provider")
		isProblem(t, e.do(pay), http.StatusConflict, "/problems/idempotency-key-in-progress")
		g.release(0)
		if r := testkit.Recv(t, original, "the original"); r.Status != http.StatusCreated {
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

	t.Run("lease taken over", func(t *testing.T) {
		gate, g := withGate()
		e := newEnv(t, gate)
		t.Cleanup(g.releaseAll)
		token := e.signUp("stalled@example.com")
		orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
		pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

		stalled := async(e, pay)
		testkit.Recv(t, g.entered, "the original at the provider")
		e.clock.Advance(e.deps.Lease)
		retry := async(e, pay)
		testkit.Recv(t, g.entered, "the retry at the provider")
		// The stalled attempt finishes first: fenced, its writes roll back.
		g.release(0)
		isProblem(t, testkit.Recv(t, stalled, "the stalled original"), http.StatusConflict, "/problems/idempotency-lease-lost")
		g.release(1)
		if r := testkit.Recv(t, retry, "the retry"); r.Status != http.StatusCreated {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		if c, pays := e.charges(), e.count("payments"); c != 1 || pays != 1 {
			t.Fatalf("%d charges, %d payments; want 1 each", c, pays)
		}
		wantSeries(t, e.metrics(),
			`shop_idempotency_outcomes_total{outcome="taken_over",route="/api/v1/orders/:id/payments"} 1`,
			`shop_idempotency_outcomes_total{outcome="lease_lost",route="/api/v1/orders/:id/payments"} 1`,
			`shop_idempotency_outcomes_total{outcome="stored",route="/api/v1/orders/:id/payments"} 1`,
		)
		if strings.Contains(e.metrics(), `outcome="retried"`) {
			t.Error("a lease takeover is counted as the retry of a released key")
		}
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

// /healthz says the process is up; /readyz also needs the database to
// answer and the schema to be in place.
func TestReadiness(t *testing.T) {
	db := testkit.NewDB(t)
	srv := httptest.NewServer(newServer(t, setup{Provider: &payments.Simulated{DB: db}, Deps: handlers.Deps{DB: db, TTL: ttl, Lease: 30 * time.Second}}))
	t.Cleanup(srv.Close)
	e := &env{t: t, db: db, url: srv.URL}
	probe := func(path string, want int, body string) {
		t.Helper()
		r := e.do(request{method: "GET", path: path})
		if r.Status != want || !strings.Contains(string(r.Body), body) {
			t.Fatalf("%s: %d %s, want %d %s", path, r.Status, r.Body, want, body)
		}
	}
	probe("/healthz", http.StatusOK, "ok")
	probe("/readyz", http.StatusServiceUnavailable, "migrations not applied")
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	probe("/readyz", http.StatusOK, "ready")
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.Close()
	probe("/readyz", http.StatusServiceUnavailable, "database unreachable")
	probe("/healthz", http.StatusOK, "ok")
}

// Every request is logged once, with its route, status, duration, user and,
// on idempotent routes, the key as a short hash and whether the answer was
// replayed. Passwords, tokens and keys never appear.
func TestRequestLog(t *testing.T) {
	var logs testkit.Buffer
	e := newEnv(t, func(d *setup) { d.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	const password, rawKey, wrongToken = "correct horse", "a-secret-key-7f3a", "shp_not-a-real-token-9c1d"
	signup := e.do(request{method: "POST", path: "/api/v1/users", body: `{"email":"logs@example.com","password":"` + password + `"}`})
	userID := signup.json(t)["id"].(string)
	token := e.do(request{method: "POST", path: "/api/v1/tokens", body: `{"email":"logs@example.com","password":"` + password + `"}`}).json(t)["token"].(string)
	e.do(request{method: "POST", path: "/api/v1/tokens", body: `{"email":"logs@example.com","password":"wrong ` + password + `"}`})
	e.do(request{method: "GET", path: "/api/v1/orders", token: wrongToken})
	order := request{method: "POST", path: "/api/v1/orders", token: token, key: key(`"` + rawKey + `"`), body: orderBody(e.products()[0], 1)}
	e.do(order)
	e.do(order)
	sent := 6

	text := logs.String()
	for _, secret := range []string{password, token, wrongToken, rawKey} {
		if strings.Contains(text, secret) {
			t.Fatalf("the log reveals %q:\n%s", secret, text)
		}
	}
	var lines []map[string]any
	scanner := bufio.NewScanner(strings.NewReader(text))
	for scanner.Scan() {
		var line map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line["msg"] == "request" {
			lines = append(lines, line)
		}
	}
	if len(lines) != sent {
		t.Fatalf("%d request lines for %d requests:\n%s", len(lines), sent, text)
	}
	sum := sha256.Sum256([]byte(rawKey))
	hashed := hex.EncodeToString(sum[:6])
	want := []map[string]any{
		{"route": "/api/v1/users", "status": 201.0},
		{"route": "/api/v1/tokens", "status": 201.0},
		{"route": "/api/v1/tokens", "status": 401.0},
		{"route": "/api/v1/orders", "method": "GET", "status": 401.0},
		{"route": "/api/v1/orders", "method": "POST", "status": 201.0, "user_id": userID, "idempotency_key": hashed, "replayed": false},
		{"route": "/api/v1/orders", "method": "POST", "status": 201.0, "user_id": userID, "idempotency_key": hashed, "replayed": true},
	}
	for i, w := range want {
		for field, value := range w {
			if lines[i][field] != value {
				t.Errorf("line %d: %s = %v, want %v: %v", i, field, lines[i][field], value, lines[i])
			}
		}
		if _, ok := lines[i]["duration"].(float64); !ok {
			t.Errorf("line %d has no duration: %v", i, lines[i])
		}
		if _, ok := w["user_id"]; !ok && lines[i]["user_id"] != nil {
			t.Errorf("line %d names a user: %v", i, lines[i])
		}
	}
}

// The keys listing carries what the "Recent requests" page shows: route,
// state, status, created and expiry times, and the replay count.
func TestKeysListingHasEveryField(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("recent@example.com")
	e.createOrder(token, "k", orderBody(e.products()[0], 1))
	r := e.do(request{method: "GET", path: "/api/v1/idempotency-keys", token: token})
	var list struct {
		Keys []struct {
			Key, Method, Route, State string
			Status                    *int
			Replays                   *int
			CreatedAt                 time.Time `json:"created_at"`
			ExpiresAt                 time.Time `json:"expires_at"`
		} `json:"idempotency_keys"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Keys) != 1 {
		t.Fatalf("keys: %v %s", err, r.Body)
	}
	k := list.Keys[0]
	if k.Key != "k" || k.Method != "POST" || k.Route != "/api/v1/orders" || k.State != "completed" ||
		k.Status == nil || *k.Status != http.StatusCreated || k.Replays == nil {
		t.Fatalf("key: %+v", k)
	}
	if !k.CreatedAt.Equal(e.clock.Now().Truncate(time.Microsecond)) || k.ExpiresAt.Sub(k.CreatedAt) != ttl {
		t.Fatalf("created %v, expires %v; want now (%v) and a TTL (%v) later", k.CreatedAt, k.ExpiresAt, e.clock.Now(), ttl)
	}
}
