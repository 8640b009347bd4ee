package tests

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/payments"
)

// stripeMockVersion is the stripe-mock that .ci/run installs.
const stripeMockVersion = "v0.203.0"

// startStripeMock runs stripe-mock on a free port of 127.0.0.1 and returns
// its URL. stripe-mock validates every request against Stripe's OpenAPI
// specification and answers from fixtures: a confirmed PaymentIntent comes
// back "requires_payment_method" (a refusal). With succeed, the test hands
// it the shipped fixtures with that one status set to "succeeded", so that
// a payment can go through end to end.
func startStripeMock(t *testing.T, succeed bool) string {
	t.Helper()
	bin := os.Getenv("STRIPE_MOCK")
	if bin == "" {
		bin, _ = exec.LookPath("stripe-mock")
	}
	if bin == "" {
		if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			if candidate := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "stripe-mock"); fileExists(candidate) {
				bin = candidate
			}
		}
	}
	if bin == "" {
		needStripeMock(t)
	}
	args := []string{"-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:"}
	if succeed {
		args = append(args, "-fixtures", succeededFixtures(t))
	}
	cmd := exec.Command(bin, args...)
	dieWithTests(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	listening := regexp.MustCompile(`Listening for HTTP at address: (\S+)`)
	addr := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(out)
		for scanner.Scan() {
			if m := listening.FindStringSubmatch(scanner.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	a, ok := <-addr
	if !ok {
		t.Fatal("stripe-mock exited before listening")
	}
	go io.Copy(io.Discard, out)
	return "http://" + a
}

// needStripeMock fails the test in CI and skips it elsewhere: stripe-mock
// is not installed.
func needStripeMock(t *testing.T) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("stripe-mock is not installed: go install github.com/stripe/stripe-mock@%s", stripeMockVersion)
	}
	t.Skipf("stripe-mock is not installed (go install github.com/stripe/stripe-mock@%s); CI installs it", stripeMockVersion)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// succeededFixtures is the fixtures file docs/operations.md gives
// stripe-mock: its own, with a PaymentIntent's status "succeeded".
func succeededFixtures(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(stripeMockFixtures)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// stripeMockFixtures is shipped in the repository: stripe-mock's bundled
// fixtures3.json of stripeMockVersion with one change, made by
// jq '.resources.payment_intent.status = "succeeded"'.
const stripeMockFixtures = "../payments/testdata/stripe-mock-fixtures.json"

// stripeCall is one request the Stripe provider sent.
type stripeCall struct {
	method, path, idempotencyKey string
	form                         url.Values
	status                       int
}

// recording is an HTTP transport that keeps every request it carries.
type recording struct {
	mu    sync.Mutex
	calls []stripeCall
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(strings.NewReader(string(body)))
	form, _ := url.ParseQuery(string(body))
	resp, err := http.DefaultTransport.RoundTrip(req)
	call := stripeCall{method: req.Method, path: req.URL.Path, idempotencyKey: req.Header.Get("Idempotency-Key"), form: form}
	if resp != nil {
		call.status = resp.StatusCode
	}
	r.mu.Lock()
	r.calls = append(r.calls, call)
	r.mu.Unlock()
	return resp, err
}

func (r *recording) all() []stripeCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stripeCall(nil), r.calls...)
}

func withStripe(base string, transport http.RoundTripper) option {
	return func(deps *setup) {
		deps.Provider = payments.NewStripe(payments.StripeConfig{
			SecretKey: "sk_test_shop", APIBase: base, HTTPClient: &http.Client{Transport: transport, Timeout: 30 * time.Second}, Tracer: deps.Tracer,
		})
	}
}

// With PAYMENT_PROVIDER=stripe against stripe-mock, the API and the pay
// form work end to end, and each charge is one PaymentIntent created and
// confirmed in one call, with the derived key as Stripe's Idempotency-Key
// and the order and key in its metadata — parameters stripe-mock checked
// against Stripe's specification (it answers 400 to anything else).
func TestStripeChargesThroughStripeMock(t *testing.T) {
	rec := &recording{}
	e := newEnv(t, withStripe(startStripeMock(t, true), rec))
	token := e.signUp("stripe@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 2))
	pay := e.payRequest(token, orderID, "pay", payments.MethodVisa)
	r := e.do(pay)
	if r.Status != http.StatusCreated {
		t.Fatalf("pay through stripe-mock: %d %s", r.Status, r.Body)
	}
	chargeID, _ := r.json(t)["provider_charge_id"].(string)
	if !strings.HasPrefix(chargeID, "pi_") {
		t.Fatalf("provider_charge_id %q, want a PaymentIntent id", chargeID)
	}
	if e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 || e.count("payments") != 1 {
		t.Fatal("the order is not paid once")
	}
	var providerKey string
	e.db.Table("payments").Pluck("provider_key", &providerKey)
	var total int64
	e.db.Table("orders").Where("id = ?", orderID).Pluck("total_cents", &total)
	calls := rec.all()
	if len(calls) != 1 {
		t.Fatalf("%d requests to Stripe, want 1: %+v", len(calls), calls)
	}
	c := calls[0]
	want := url.Values{
		"amount": {fmt.Sprint(total)}, "currency": {"usd"}, "payment_method": {payments.MethodVisa}, "confirm": {"true"},
		"metadata[order_id]": {orderID}, "metadata[idempotency_key]": {providerKey}, "payment_method_types[0]": {"card"},
	}
	if c.method != "POST" || c.path != "/v1/payment_intents" || c.idempotencyKey != providerKey || c.status != http.StatusOK {
		t.Fatalf("request %s %s Idempotency-Key %q answered %d; want POST /v1/payment_intents with %q, 200", c.method, c.path, c.idempotencyKey, c.status, providerKey)
	}
	for name, values := range want {
		if got := c.form[name]; len(got) != 1 || got[0] != values[0] {
			t.Fatalf("form %s = %v, want %v (whole form: %v)", name, got, values, c.form)
		}
	}
	// A replay does not reach Stripe.
	if again := e.do(pay); !again.replayed() || len(rec.all()) != 1 {
		t.Fatalf("replay: replayed=%v, %d requests to Stripe", again.replayed(), len(rec.all()))
	}

	// The pay form, in the browser's way.
	s := e.shopper()
	s.signUp("stripe-web@example.com")
	orderPath := s.placeOrder(s.checkout(e.products()[1], 1))
	if r := s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa)); r.Status != http.StatusSeeOther {
		t.Fatalf("pay form through stripe-mock: %d %s", r.Status, r.Body)
	}
	isPage(t, s.get(orderPath), http.StatusOK, "Paid.")
	if len(rec.all()) != 2 {
		t.Fatalf("%d requests to Stripe, want 2", len(rec.all()))
	}
}

// stripe-mock's own fixture answers a confirmation with a PaymentIntent
// that requires another payment method: the shop records a decline (402,
// stored), as Stripe's refusal.
func TestStripeMockRefusalIsADecline(t *testing.T) {
	e := newEnv(t, withStripe(startStripeMock(t, false), http.DefaultTransport))
	token := e.signUp("stripe-refused@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	pay := e.payRequest(token, orderID, "pay", payments.MethodChargeDeclined)
	isProblem(t, e.do(pay), http.StatusPaymentRequired, "/problems/payment-declined")
	if again := e.do(pay); again.Status != http.StatusPaymentRequired || !again.replayed() {
		t.Fatalf("the decline again: %d replayed=%v", again.Status, again.replayed())
	}
	if e.count("payments", "status = ?", "declined") != 1 || e.count("orders", "status = ?", "pending") != 1 {
		t.Fatal("want one declined payment and the order pending")
	}
}

// fakeStripe is Stripe's idempotency as its documentation states it, in the
// test: a request with a key it has seen, and the same parameters, gets
// the first answer; other parameters get an idempotency_error; a new key
// with confirm=true succeeds. Its ledger is the provider's record of the
// money taken. stripe-mock keeps no state, so it cannot show this.
type fakeStripe struct {
	mu     sync.Mutex
	byKey  map[string]fakeIntent // the keys Stripe still remembers
	kept   map[string]fakeIntent // every PaymentIntent, by the key in its metadata: what search finds
	loseN  int                   // the next n answers are lost: the connection is cut after the charge
	ledger int
	// refunds, the same way: by key, every one kept, and counted
	refundsByKey map[string]fakeIntent
	refundsKept  []fakeRefund
	refundStatus string // what a new refund is: "succeeded" when empty
	refuseRefund string // an error code Stripe refuses every refund with, when set
}

type fakeIntent struct {
	params string
	body   []byte
}

func newFakeStripe(t *testing.T) (*fakeStripe, string) {
	f := &fakeStripe{byKey: map[string]fakeIntent{}, kept: map[string]fakeIntent{}, refundsByKey: map[string]fakeIntent{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/payment_intents/search" {
		f.search(w, r.URL.Query().Get("query"))
		return
	}
	if r.URL.Path == "/v1/refunds" {
		f.serveRefunds(w, r)
		return
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/payment_intents/"); ok && id != "" && (r.Method == http.MethodGet || strings.HasSuffix(id, "/cancel")) {
		f.retrieve(w, id)
		return
	}
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	prior, seen := f.byKey[key]
	if !seen {
		f.ledger++
		prior = fakeIntent{params: form.Encode(), body: fmt.Appendf(nil,
			`{"id":"pi_fake%d","object":"payment_intent","status":"succeeded","amount":%s,"currency":%q,"metadata":{"idempotency_key":%q}}`,
			f.ledger, form.Get("amount"), form.Get("currency"), key)}
		if form.Get("payment_method") == payments.MethodAuthentication {
			prior.body = awaitingIntent(f.ledger, form, key)
		}
		f.byKey[key] = prior
		f.kept[key] = prior
	}
	lose := f.loseN > 0
	f.loseN--
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case lose:
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	case prior.params != form.Encode():
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`))
	default:
		w.Write(prior.body)
	}
}

// search answers metadata['idempotency_key']:'…', as Stripe's search does.
func (f *fakeStripe) search(w http.ResponseWriter, query string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var data []string
	for key, intent := range f.kept {
		if query == "metadata['idempotency_key']:'"+key+"'" {
			data = append(data, string(intent.body))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"object":"search_result","url":"/v1/payment_intents/search","has_more":false,"data":[%s]}`, strings.Join(data, ","))
}

// forget is Stripe pruning its idempotency keys, 24 hours on.
func (f *fakeStripe) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.byKey)
	clear(f.refundsByKey)
}

func (f *fakeStripe) charges() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ledger
}

// lostStripeReply is a shop on a fake Stripe whose first answer is lost
// after it charged, and a user's order, not paid yet.
func lostStripeReply(t *testing.T, email string, product int) (*fakeStripe, *env, string, string) {
	t.Helper()
	fake, base := newFakeStripe(t)
	fake.loseN = 1
	e := newEnv(t, withStripe(base, http.DefaultTransport))
	token := e.signUp(email)
	return fake, e, token, e.createOrder(token, "order", orderBody(e.products()[product], 1))
}

// A Stripe charge whose answer was lost leaves its attempt in doubt; a new
// key sends the attempt's exact request again under the attempt's key,
// Stripe answers it with the first PaymentIntent, and the new key is told
// the order is paid: one PaymentIntent in Stripe's ledger. The first key's
// retry gets that PaymentIntent as its payment.
func TestStripeLostReplyIsResolvedNotChargedTwice(t *testing.T) {
	fake, e, token, orderID := lostStripeReply(t, "stripe-lost@example.com", 2)
	first := e.payRequest(token, orderID, "k1", payments.MethodVisa)
	isProblem(t, e.do(first), http.StatusBadGateway, "/problems/payment-unconfirmed")
	if fake.charges() != 1 || e.count("payments") != 0 {
		t.Fatalf("after the lost answer: %d charges at Stripe, %d payments; want 1, 0", fake.charges(), e.count("payments"))
	}
	isProblem(t, e.do(e.payRequest(token, orderID, "k2", payments.MethodMastercard)), http.StatusConflict, "/problems/order-already-paid")
	retry := e.do(first)
	if retry.Status != http.StatusCreated || retry.json(t)["provider_charge_id"] != "pi_fake1" {
		t.Fatalf("the first key's retry: %d %s; want 201 with pi_fake1", retry.Status, retry.Body)
	}
	if fake.charges() != 1 || e.count("payments") != 1 || e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 {
		t.Fatalf("%d charges at Stripe, %d payments; want 1, 1 and the order paid", fake.charges(), e.count("payments"))
	}
}

// Stripe's idempotency error (the key was first used with other
// parameters) says nothing about whether the first request charged: the
// attempt stays in doubt, and no other key may charge the order.
func TestStripeIdempotencyErrorNeverChargesTwice(t *testing.T) {
	fake, e, token, orderID := lostStripeReply(t, "stripe-idem@example.com", 0)
	isProblem(t, e.do(e.payRequest(token, orderID, "k1", payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")
	// Stripe now remembers the key with other parameters than the attempt's.
	var providerKey string
	e.db.Table("payment_attempts").Pluck("provider_key", &providerKey)
	fake.mu.Lock()
	intent := fake.byKey[providerKey]
	intent.params = "amount=1"
	fake.byKey[providerKey] = intent
	fake.mu.Unlock()

	for _, k := range []string{"k2", "k3"} {
		isProblem(t, e.do(e.payRequest(token, orderID, k, payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")
	}
	if fake.charges() != 1 || e.count("payments") != 0 || e.count("payment_attempts", "state = ?", "in_doubt") != 1 || e.count("payment_attempts") != 1 {
		t.Fatalf("%d charges at Stripe, %d payments, %d attempts; want 1, 0 and the one attempt still in doubt", fake.charges(), e.count("payments"), e.count("payment_attempts"))
	}
}

// The program, configured for Stripe by its environment, charges through
// it: PAYMENT_PROVIDER=stripe with STRIPE_API_BASE pointing at stripe-mock.
func TestProcessConfiguredForStripe(t *testing.T) {
	mock := startStripeMock(t, true)
	databaseURL := testkit.URL(t)
	p := startShop(t, "shop on Stripe", "DATABASE_URL="+databaseURL, "PAYMENT_PROVIDER=stripe",
		"STRIPE_SECRET_KEY=sk_test_process", "STRIPE_API_BASE="+mock, "STRIPE_WEBHOOK_SECRET="+webhookSecret)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: p.url}
	token := e.signUp("stripe-process@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	r := e.do(e.payRequest(token, orderID, "pay", payments.MethodVisa))
	if id, _ := r.json(t)["provider_charge_id"].(string); r.Status != http.StatusCreated || !strings.HasPrefix(id, "pi_") {
		t.Fatalf("pay: %d %s; want 201 with a PaymentIntent", r.Status, r.Body)
	}
	if e.count("simulated_charges") != 0 {
		t.Fatal("the simulated provider was called")
	}
	// The webhook endpoint is served, and refuses an unsigned delivery.
	isProblem(t, e.do(request{method: "POST", path: "/webhooks/stripe", body: `{"id":"evt_1"}`, offContract: true}), http.StatusBadRequest, "/problems/webhook-signature-invalid")
}

// Stripe may forget an idempotency key after 24 hours and take a request
// with it as new. An attempt in doubt for longer — the shop was down for a
// day — is looked up by its metadata instead of being sent again: the
// reconciler records the first PaymentIntent, and nothing is charged twice.
func TestStripeAttemptOlderThanItsKeyIsLookedUpNotSentAgain(t *testing.T) {
	fake, e, token, orderID := lostStripeReply(t, "stripe-day@example.com", 0)
	isProblem(t, e.do(e.payRequest(token, orderID, "k1", payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")
	e.clock.Advance(25 * time.Hour)
	fake.forget()
	if n, err := e.server.Payments().Reconcile(t.Context()); err != nil || n != 1 {
		t.Fatalf("reconcile a day later: %d resolved, %v; want 1", n, err)
	}
	if fake.charges() != 1 || e.count("payments", "status = ? AND provider_charge_id = ?", "succeeded", "pi_fake1") != 1 ||
		e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 {
		t.Fatalf("%d PaymentIntents at Stripe, %d payments; want the first, recorded once, and the order paid", fake.charges(), e.count("payments"))
	}
}
