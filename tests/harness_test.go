// Package tests drives the shop end to end: a real server on a random port,
// real HTTP, and a real database — SQLite by default, PostgreSQL when
// TEST_DATABASE_URL is set (each test in a schema of its own).
package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// failing makes the first n provider calls fail with err: before the
// provider is reached (it was unavailable: nothing charged), or, with
// afterCharge, once it has charged (the reply was lost).
type failing struct {
	payments.Provider
	err         error
	afterCharge bool
	mu          sync.Mutex
	n           int
}

func (f *failing) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	switch {
	case !fail:
		return f.Provider.Charge(ctx, req)
	case f.afterCharge:
		if _, err := f.Provider.Charge(ctx, req); err != nil {
			return payments.Charge{}, err
		}
	}
	return payments.Charge{}, f.err
}

// Authentication and Authenticate are the wrapped simulation's page, which
// never fails.
func (f *failing) Authentication(ctx context.Context, chargeID string) (payments.Authentication, bool, error) {
	return f.Provider.(payments.Authenticator).Authentication(ctx, chargeID)
}

func (f *failing) Authenticate(ctx context.Context, chargeID string, complete bool) (payments.Authentication, bool, error) {
	return f.Provider.(payments.Authenticator).Authenticate(ctx, chargeID, complete)
}

// env is one running shop and its database.
type env struct {
	t        *testing.T
	db       *gorm.DB
	dbURL    string
	url      string
	provider *payments.Simulated
	clock    *testkit.Clock
	deps     setup
	server   *handlers.Server
}

// setup is what a test's server is built from: the handlers' Deps, and
// the provider and authentication expiry of the payments service built
// for it, as main builds one.
type setup struct {
	handlers.Deps
	Provider   payments.Provider
	AuthExpiry time.Duration
}

type option func(*setup)

func withLatency(d time.Duration) option {
	return func(deps *setup) { deps.Provider.(*payments.Simulated).Latency = d }
}

func withWait(d time.Duration) option {
	return func(deps *setup) { deps.Wait = d }
}

func withProvider(wrap func(payments.Provider) payments.Provider) option {
	return func(deps *setup) { deps.Provider = wrap(deps.Provider) }
}

const ttl = 24 * time.Hour

func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	dbURL := testkit.URL(t)
	db := testkit.Open(t, dbURL)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, dbURL, db, opts...)
}

// newEnvOn is newEnv on a database the test made, as it made it.
func newEnvOn(t *testing.T, dbURL string, db *gorm.DB, opts ...option) *env {
	t.Helper()
	if err := orders.Seed(db); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	e := &env{t: t, db: db, dbURL: dbURL, provider: &payments.Simulated{DB: db, AuthExpiry: cfg.AuthExpiry}, clock: testkit.NewClock(time.Now().UTC())}
	e.deps = setup{Provider: e.provider, AuthExpiry: cfg.AuthExpiry, Deps: handlers.Deps{
		DB: db, TTL: ttl, Lease: 30 * time.Second, Wait: 5 * time.Second,
		Now: e.clock.Now, BcryptCost: bcrypt.MinCost,
		OrderExpiry: cfg.OrderExpiry, TokenTTL: cfg.TokenTTL, TokenCacheTTL: cfg.TokenCacheTTL,
		SessionIdle: cfg.SessionIdle, SessionMaxAge: cfg.SessionMaxAge,
	}}
	for _, o := range opts {
		o(&e.deps)
	}
	e.server = newServer(t, e.deps)
	srv := httptest.NewServer(e.server)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// newServer builds a server, and its payments service, that is closed when
// the test ends, after the HTTP servers started later: Close stops its
// replay flusher.
func newServer(t *testing.T, with setup) *handlers.Server {
	t.Helper()
	deps := with.Deps
	logger := deps.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if deps.Payments == nil { // unless the test built its own
		deps.Payments = billing.New(billing.Config{
			DB: deps.DB, Provider: with.Provider, Lease: deps.Lease, AttemptTimeout: middleware.Config{Lease: deps.Lease}.AttemptTimeout(),
			AuthExpiry: with.AuthExpiry, AuthPoll: config.Default().AuthPoll, RollForward: config.Default().RollForward, Now: deps.Now, Logger: slog.New(httpkit.RequestIDs(logger.Handler())),
		})
	}
	s := handlers.NewServer(deps)
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return s
}

// response is an answer, read whole.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("body is not JSON (%v): %s", err, r.Body)
	}
	return v
}

// field is the string member name of the JSON object in the body, or an
// error. For worker goroutines, which must not call t.Fatal: FailNow ends
// only the goroutine that calls it, and the test would wait for it forever.
func (r response) field(name string) (string, error) {
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		return "", fmt.Errorf("body is not JSON (%v): %s", err, r.Body)
	}
	s, ok := v[name].(string)
	if !ok {
		return "", fmt.Errorf("no string %q in %s", name, r.Body)
	}
	return s, nil
}

// request is one API call.
type request struct {
	method, path string
	token        string
	key          *string // nil: no Idempotency-Key header
	contentType  string  // application/json when empty and there is a body
	body         string
	header       http.Header
	// offContract: the request breaks openapi.yaml on purpose, so only its
	// answer is checked against it.
	offContract bool
	// from is the loopback address the request comes from (127.0.0.2…),
	// for a client elsewhere; 127.0.0.1 when empty.
	from string
}

func key(k string) *string { return &k }

// clientFrom is client, its connections made from the address from.
func clientFrom(from string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c := *client
	c.Transport = contractTransport{next: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	return &c
}

// client checks every request and answer against the API's document.
var client = &http.Client{
	Transport:     contractTransport{next: http.DefaultTransport},
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func (e *env) send(r request) (response, error) {
	ctx := context.Background()
	if r.offContract {
		ctx = offContract(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, e.url+r.path, strings.NewReader(r.body))
	if err != nil {
		return response{}, err
	}
	for name, values := range r.header {
		req.Header[name] = values
	}
	if r.body != "" {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.key != nil {
		req.Header["Idempotency-Key"] = []string{*r.key}
	}
	c := client
	if r.from != "" {
		c = clientFrom(r.from)
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: body}, err
}

func (e *env) do(r request) response {
	e.t.Helper()
	resp, err := e.send(r)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// concurrently sends the requests all at once, behind one barrier, and
// returns the answers in order.
func (e *env) concurrently(rs []request) []response {
	e.t.Helper()
	start := make(chan struct{})
	out := make([]response, len(rs))
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = e.send(r)
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// signUp creates a user and returns a bearer token for it.
func (e *env) signUp(email string) string {
	e.t.Helper()
	creds := fmt.Sprintf(`{"email":%q,"password":"correct horse"}`, email)
	if r := e.do(request{method: "POST", path: "/api/v1/users", body: creds}); r.Status != http.StatusCreated {
		e.t.Fatalf("sign up: %d %s", r.Status, r.Body)
	}
	r := e.do(request{method: "POST", path: "/api/v1/tokens", body: creds})
	if r.Status != http.StatusCreated {
		e.t.Fatalf("token: %d %s", r.Status, r.Body)
	}
	return r.json(e.t)["token"].(string)
}

// products returns the ids of the products tests may buy freely, by SKU:
// those of the catalog that cannot run out in a test (plentiful units).
// The few left and the sold out are the stock tests' own.
func (e *env) products() []string {
	e.t.Helper()
	var ids []string
	if err := e.db.Model(&models.Product{}).Where("stock >= ?", plentifulStock).Order("sku").Pluck("id", &ids).Error; err != nil || len(ids) < 2 {
		e.t.Fatalf("catalog: %v %v", ids, err)
	}
	return ids
}

// plentifulStock is the fewest units of a product tests buy freely.
const plentifulStock = 1000

func orderBody(items ...any) string {
	var parts []string
	for i := 0; i+1 < len(items); i += 2 {
		parts = append(parts, fmt.Sprintf(`{"product_id":%q,"quantity":%v}`, items[i], items[i+1]))
	}
	return `{"items":[` + strings.Join(parts, ",") + `]}`
}

func payBody(method string) string { return fmt.Sprintf(`{"payment_method":%q}`, method) }

// createOrder places an order and returns its id.
func (e *env) createOrder(token, k, body string) string {
	e.t.Helper()
	r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: &k, body: body})
	if r.Status != http.StatusCreated {
		e.t.Fatalf("create order: %d %s", r.Status, r.Body)
	}
	return r.json(e.t)["id"].(string)
}

// replays is the replays the database holds for a key: its row's, from a
// release before migration 16, and its operation's row of idempotency_replays.
func (e *env) replays(key string) int {
	e.t.Helper()
	var n int
	err := e.db.Raw(`SELECT k.replays + COALESCE(r.n, 0) FROM idempotency_keys k
  LEFT JOIN idempotency_replays r ON r.key_id = k.id AND r.operation_id = k.operation_id WHERE k."key" = ?`, key).Row().Scan(&n)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// count counts rows of a table, with an optional condition.
func (e *env) count(table string, where ...any) int64 {
	e.t.Helper()
	var n int64
	q := e.db.Table(table)
	if len(where) > 0 {
		q = q.Where(where[0], where[1:]...)
	}
	if err := q.Count(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

// charges counts the provider's successful charges: money taken.
func (e *env) charges() int64 { return e.count("simulated_charges", "status = ?", "succeeded") }

// sideEffects is every write a request could make, for asserting that a
// refused request made none. keyRows counts every key the server knows,
// released ones included; storedKeys only those with a stored answer.
type sideEffects struct{ users, orders, payments, charges, keyRows, storedKeys int64 }

func (e *env) sideEffects() sideEffects {
	return sideEffects{
		e.count("users"), e.count("orders"), e.count("payments"), e.count("simulated_charges"),
		e.count("idempotency_keys"), e.count("idempotency_keys", "state = ?", "completed"),
	}
}

func isProblem(t *testing.T, r response, status int, typ string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	if got := r.json(t)["type"]; got != typ {
		t.Fatalf("problem type %v, want %s", got, typ)
	}
}

func withLease(d time.Duration) option {
	return func(deps *setup) { deps.Lease = d }
}

// withAfterCharge runs hook once the provider has charged and before it
// answers, the most expensive moment to crash: a hook that blocks
// reproduces a process that froze or died there. The key stays in progress
// under its lease, the charge exists, nothing is committed.
func withAfterCharge(hook func()) option {
	return withProvider(func(p payments.Provider) payments.Provider { return afterCharge{p, hook} })
}

// afterCharge is a provider that charges, then runs its hook before it
// returns the answer.
type afterCharge struct {
	payments.Provider
	hook func()
}

func (p afterCharge) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	charge, err := p.Provider.Charge(ctx, req)
	if err == nil {
		p.hook()
	}
	return charge, err
}

// answerOf is the result of a request sent on its own goroutine.
type answerOf struct {
	response
	err error
}

// async sends r on its own goroutine; the answer arrives on the channel.
func (e *env) async(r request) <-chan answerOf {
	done := make(chan answerOf, 1)
	go func() {
		resp, err := e.send(r)
		done <- answerOf{resp, err}
	}()
	return done
}
