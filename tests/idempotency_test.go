package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// 1. A replay returns the stored status, body and Location, marked as
// replayed; the operation ran once.
func TestReplayReturnsTheOriginalAnswer(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("replay@example.com")
	p := e.products()
	body := orderBody(p[0], 2, p[1], 1)

	first := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key(`"order-1"`), body: body})
	if first.Status != http.StatusCreated || first.replayed() {
		t.Fatalf("first: %d replayed=%v %s", first.Status, first.replayed(), first.Body)
	}
	orderID := first.json(t)["id"].(string)
	if loc := first.Header.Get("Location"); loc != "/api/v1/orders/"+orderID {
		t.Fatalf("Location %q", loc)
	}
	// The bare form of the same key names the same operation.
	for _, k := range []string{`"order-1"`, `order-1`} {
		again := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key(k), body: body})
		if again.Status != http.StatusCreated || !again.replayed() {
			t.Fatalf("replay with key %s: %d replayed=%v", k, again.Status, again.replayed())
		}
		if !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("replayed body differs:\n%s\n%s", again.Body, first.Body)
		}
		for _, h := range []string{"Location", "Content-Type"} {
			if again.Header.Get(h) != first.Header.Get(h) {
				t.Fatalf("replayed %s %q, want %q", h, again.Header.Get(h), first.Header.Get(h))
			}
		}
	}
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}

	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay-1"), body: payBody(payments.MethodVisa)}
	paid := e.do(pay)
	replay := e.do(pay)
	if paid.Status != http.StatusCreated || replay.Status != http.StatusCreated || !replay.replayed() || !bytes.Equal(paid.Body, replay.Body) {
		t.Fatalf("pay: %d %s; replay: %d %v %s", paid.Status, paid.Body, replay.Status, replay.replayed(), replay.Body)
	}
	if replay.Header.Get("Location") != "/api/v1/orders/"+orderID+"/payments/"+paid.json(t)["id"].(string) {
		t.Fatalf("payment Location %q", replay.Header.Get("Location"))
	}
	if c, calls := e.charges(), e.provider.Calls(); c != 1 || calls != 1 {
		t.Fatalf("%d charges, %d provider calls; want 1, 1", c, calls)
	}
	if n := e.count("orders", "id = ? AND status = ?", orderID, "paid"); n != 1 {
		t.Fatal("order is not paid")
	}
	if err := e.server.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if replays := e.replays("pay-1"); replays != 1 {
		t.Fatalf("replays = %d, want 1", replays)
	}
}

// 2. The same key with a different body is refused with 422, and nothing
// more happens.
func TestSameKeyDifferentBodyIsRefused(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("mismatch@example.com")
	p := e.products()
	orderID := e.createOrder(token, "order", orderBody(p[0], 1))

	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}
	if r := e.do(pay); r.Status != http.StatusCreated {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	pay.body = payBody(payments.MethodDeclined)
	isProblem(t, e.do(pay), http.StatusUnprocessableEntity, "/problems/idempotency-key-reused")
	// Another path with the same key is another request too.
	other := e.createOrder(token, "order-2", orderBody(p[1], 1))
	pay.path, pay.body = "/api/v1/orders/"+other+"/payments", payBody(payments.MethodVisa)
	isProblem(t, e.do(pay), http.StatusUnprocessableEntity, "/problems/idempotency-key-reused")
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("order"), body: orderBody(p[0], 2)}),
		http.StatusUnprocessableEntity, "/problems/idempotency-key-reused")

	if c, calls, orders := e.charges(), e.provider.Calls(), e.count("orders"); c != 1 || calls != 1 || orders != 2 {
		t.Fatalf("%d charges, %d provider calls, %d orders; want 1, 1, 2", c, calls, orders)
	}
}

// 3. Fifty identical requests at once: one order, one charge. Every answer
// is the original 201 (run, or waited for and replayed) or a 409 with
// Retry-After; never a 5xx.
func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	t.Run("duplicates wait and replay", func(t *testing.T) {
		// A wait far longer than the original needs, even on a loaded
		// machine: the duplicates are woken when it ends, so it costs nothing.
		testStorm(t, false, withLatency(100*time.Millisecond), withWait(20*time.Second))
	})
	t.Run("duplicates give up with 409", func(t *testing.T) {
		testStorm(t, true, withLatency(400*time.Millisecond), withWait(30*time.Millisecond))
	})
}

func testStorm(t *testing.T, wantConflicts bool, opts ...option) {
	e := newEnv(t, opts...)
	token := e.signUp("storm@example.com")
	p := e.products()
	const n = 50

	storm := func(r request) []response { return e.concurrently(slices.Repeat([]request{r}, n)) }
	check := func(what string, answers []response) []byte {
		var original []byte
		var created, replayed, conflicts int
		for _, r := range answers {
			switch r.Status {
			case http.StatusCreated:
				created++
				if r.replayed() {
					replayed++
				}
				if original == nil {
					original = r.Body
				} else if !bytes.Equal(original, r.Body) {
					t.Fatalf("%s: two different 201 bodies:\n%s\n%s", what, original, r.Body)
				}
			case http.StatusConflict:
				conflicts++
				if r.Header.Get("Retry-After") == "" {
					t.Fatalf("%s: 409 without Retry-After: %s", what, r.Body)
				}
			default:
				t.Fatalf("%s: unexpected %d: %s", what, r.Status, r.Body)
			}
		}
		if created == 0 || created-replayed != 1 {
			t.Fatalf("%s: %d created of which %d replayed; want exactly one original", what, created, replayed)
		}
		// With the long wait every duplicate outlasts the original; with the
		// short one, duplicates of the slow payment give up before it ends.
		if !wantConflicts && conflicts > 0 || wantConflicts && what == "payments" && conflicts == 0 {
			t.Fatalf("%s: %d conflicts; want conflicts: %v", what, conflicts, wantConflicts)
		}
		t.Logf("%s: %d created (%d replayed), %d conflicts", what, created, replayed, conflicts)
		return original
	}

	check("orders", storm(request{method: "POST", path: "/api/v1/orders", token: token, key: key("same-order"), body: orderBody(p[0], 3)}))
	if got := e.count("orders"); got != 1 {
		t.Fatalf("%d orders, want 1", got)
	}
	var orderID string
	e.db.Table("orders").Pluck("id", &orderID)
	check("payments", storm(request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("same-payment"), body: payBody(payments.MethodVisa)}))
	if c, calls, pays := e.charges(), e.provider.Calls(), e.count("payments"); c != 1 || calls != 1 || pays != 1 {
		t.Fatalf("%d charges, %d provider calls, %d payments; want 1, 1, 1", c, calls, pays)
	}
}

// 4. Keys are scoped to the user: the same key from two users makes two
// independent orders, and neither sees the other's answer.
func TestKeysAreScopedToTheUser(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.signUp("alice@example.com"), e.signUp("bob@example.com")
	p := e.products()
	body := orderBody(p[0], 1)

	a := e.do(request{method: "POST", path: "/api/v1/orders", token: alice, key: key("shared-key"), body: body})
	b := e.do(request{method: "POST", path: "/api/v1/orders", token: bob, key: key("shared-key"), body: body})
	if a.Status != http.StatusCreated || b.Status != http.StatusCreated || a.replayed() || b.replayed() {
		t.Fatalf("alice %d %v, bob %d %v", a.Status, a.replayed(), b.Status, b.replayed())
	}
	aliceOrder, bobOrder := a.json(t)["id"].(string), b.json(t)["id"].(string)
	if aliceOrder == bobOrder {
		t.Fatal("both users got the same order")
	}
	if n := e.count("orders"); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
	// Bob cannot see or pay Alice's order, even with Alice's key.
	if r := e.do(request{method: "GET", path: "/api/v1/orders/" + aliceOrder, token: bob}); r.Status != http.StatusNotFound {
		t.Fatalf("bob reads alice's order: %d", r.Status)
	}
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/orders/" + aliceOrder + "/payments", token: bob, key: key("bob-pays"), body: payBody(payments.MethodVisa)}),
		http.StatusNotFound, "/problems/not-found")
	if got := e.sideEffects(); got.charges != 0 || got.storedKeys != 2 {
		t.Fatalf("%+v; want 0 charges, 2 stored keys", got)
	}
	var mine map[string]any
	r := e.do(request{method: "GET", path: "/api/v1/orders", token: bob})
	mine = r.json(t)
	if orders := mine["orders"].([]any); len(orders) != 1 || orders[0].(map[string]any)["id"] != bobOrder {
		t.Fatalf("bob's orders: %s", r.Body)
	}
}

// 5. Malformed keys are refused with 400 before anything is written.
func TestInvalidKeysAreRefused(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("keys@example.com")
	p := e.products()
	body := orderBody(p[0], 1)
	cases := []struct {
		name   string
		header []string // nil: no header
		typ    string
	}{
		{"missing", nil, "/problems/idempotency-key-missing"},
		{"empty", []string{""}, "/problems/idempotency-key-invalid"},
		{"empty sf-string", []string{`""`}, "/problems/idempotency-key-invalid"},
		{"256 characters", []string{strings.Repeat("k", 256)}, "/problems/idempotency-key-invalid"},
		{"256 characters quoted", []string{`"` + strings.Repeat("k", 256) + `"`}, "/problems/idempotency-key-invalid"},
		{"non-ASCII bare", []string{"clé-1"}, "/problems/idempotency-key-invalid"},
		{"non-ASCII quoted", []string{`"clé-1"`}, "/problems/idempotency-key-invalid"},
		{"unterminated sf-string", []string{`"abc`}, "/problems/idempotency-key-invalid"},
		{"bad escape", []string{`"a\x"`}, "/problems/idempotency-key-invalid"},
		{"sf-string with parameters", []string{`"k";p=1`}, "/problems/idempotency-key-invalid"},
		{"list", []string{`"a", "b"`}, "/problems/idempotency-key-invalid"},
		{"two headers", []string{"a", "b"}, "/problems/idempotency-key-invalid"},
		{"bare with space", []string{"a b"}, "/problems/idempotency-key-invalid"},
		{"bare with quote", []string{`a"b`}, "/problems/idempotency-key-invalid"},
		{"token, not string", []string{`"a"b`}, "/problems/idempotency-key-invalid"},
		{"integer item quoted wrong", []string{`"k" junk`}, "/problems/idempotency-key-invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, body: body, header: http.Header{"Idempotency-Key": tc.header}, offContract: true})
			isProblem(t, r, http.StatusBadRequest, tc.typ)
			if got := e.sideEffects(); got.orders != 0 || got.keyRows != 0 {
				t.Fatalf("wrote %+v", got)
			}
		})
	}
	// The longest allowed key works, which shows the cases above failed for
	// their key and nothing else.
	e.createOrder(token, strings.Repeat("k", 255), body)
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// 6. JSON that differs only in key order and whitespace is the same request.
func TestEquivalentJSONIsTheSameRequest(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("canonical@example.com")
	p := e.products()
	compact := fmt.Sprintf(`{"items":[{"product_id":%q,"quantity":2}]}`, p[0])
	spaced := fmt.Sprintf("{\n  \"items\" : [ { \"quantity\" : 2.0 ,\t\"product_id\" : %q } ]\n}\n", p[0])

	first := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("k"), body: compact})
	second := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("k"), body: spaced})
	if first.Status != http.StatusCreated || second.Status != http.StatusCreated || !second.replayed() || !bytes.Equal(first.Body, second.Body) {
		t.Fatalf("first %d, second %d replayed=%v", first.Status, second.Status, second.replayed())
	}
	different := fmt.Sprintf(`{"items":[{"product_id":%q,"quantity":3}]}`, p[0])
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("k"), body: different}),
		http.StatusUnprocessableEntity, "/problems/idempotency-key-reused")
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// 7. A validation failure is not stored: the corrected request with the same
// key runs.
func TestValidationFailureIsNotStored(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("validation@example.com")
	p := e.products()
	invalid := []string{
		orderBody(p[0], 0),
		orderBody(p[0], 101),
		orderBody("00000000-0000-0000-0000-000000000000", 1),
		orderBody(p[0], 1, p[0], 1),
		`{"items":[]}`,
		`{"items":[{"product_id":"x","quantity":"two"}]}`,
	}
	for _, body := range invalid {
		r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("fix-me"), body: body, offContract: true})
		isProblem(t, r, http.StatusUnprocessableEntity, "/problems/validation")
		if r.json(t)["errors"] == nil {
			t.Fatalf("no field errors: %s", r.Body)
		}
		if got := e.sideEffects(); got.orders != 0 || got.storedKeys != 0 {
			t.Fatalf("a 422 wrote %+v", got)
		}
	}
	fixed := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("fix-me"), body: orderBody(p[0], 1)})
	if fixed.Status != http.StatusCreated || fixed.replayed() {
		t.Fatalf("corrected request: %d replayed=%v %s", fixed.Status, fixed.replayed(), fixed.Body)
	}
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// 8. A transient provider failure (502) releases the key; the retry with the
// same key and body succeeds, with one charge.
func TestTransientProviderFailureReleasesTheKey(t *testing.T) {
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider {
		return &failing{Provider: p, err: payments.ErrUnavailable, n: 2}
	}))
	token := e.signUp("outage@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

	for range 2 {
		isProblem(t, e.do(pay), http.StatusBadGateway, "/problems/payment-provider-unavailable")
		if got := e.sideEffects(); got.charges != 0 || got.payments != 0 || got.storedKeys != 1 {
			t.Fatalf("a 502 wrote %+v (only the order's key should be stored)", got)
		}
	}
	r := e.do(pay)
	if r.Status != http.StatusCreated || r.replayed() {
		t.Fatalf("retry: %d %s", r.Status, r.Body)
	}
	if c, pays := e.charges(), e.count("payments"); c != 1 || pays != 1 {
		t.Fatalf("%d charges, %d payments; want 1, 1", c, pays)
	}
	// The provider's own transient failure answers the same way.
	other := e.createOrder(token, "order-2", orderBody(e.products()[1], 1))
	unavailable := request{method: "POST", path: "/api/v1/orders/" + other + "/payments", token: token, key: key("pay-2"), body: payBody(payments.MethodUnavailable)}
	isProblem(t, e.do(unavailable), http.StatusBadGateway, "/problems/payment-provider-unavailable")
	unavailable.body = payBody(payments.MethodVisa)
	if r := e.do(unavailable); r.Status != http.StatusCreated {
		t.Fatalf("retry with another card under the released key: %d %s", r.Status, r.Body)
	}
	if c := e.charges(); c != 2 {
		t.Fatalf("%d charges, want 2", c)
	}
}

// 9. A declined card is a final answer: stored, replayed, and the provider
// is not called again.
func TestDeclinedPaymentIsStoredAndReplayed(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("declined@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodDeclined)}

	first := e.do(pay)
	isProblem(t, first, http.StatusPaymentRequired, "/problems/payment-declined")
	second := e.do(pay)
	if second.Status != http.StatusPaymentRequired || !second.replayed() || !bytes.Equal(first.Body, second.Body) {
		t.Fatalf("replay: %d replayed=%v %s", second.Status, second.replayed(), second.Body)
	}
	if calls, pays, c := e.provider.Calls(), e.count("payments", "status = ?", "declined"), e.charges(); calls != 1 || pays != 1 || c != 0 {
		t.Fatalf("%d provider calls, %d declined payments, %d charges; want 1, 1, 0", calls, pays, c)
	}
	// A new key may try another card; the order then shows both attempts.
	if r := e.do(request{method: "POST", path: pay.path, token: token, key: key("pay-again"), body: payBody(payments.MethodVisa)}); r.Status != http.StatusCreated {
		t.Fatalf("second card: %d %s", r.Status, r.Body)
	}
	order := e.do(request{method: "GET", path: "/api/v1/orders/" + orderID, token: token}).json(t)
	if order["status"] != "paid" || len(order["payments"].([]any)) != 2 {
		t.Fatalf("order after decline and success: %v", order)
	}
	// Paying a paid order is final too: 409, stored, replayed, no provider call.
	paidAgain := request{method: "POST", path: pay.path, token: token, key: key("pay-third"), body: payBody(payments.MethodVisa)}
	isProblem(t, e.do(paidAgain), http.StatusConflict, "/problems/order-already-paid")
	if r := e.do(paidAgain); r.Status != http.StatusConflict || !r.replayed() {
		t.Fatalf("already-paid replay: %d replayed=%v", r.Status, r.replayed())
	}
	if calls, c := e.provider.Calls(), e.charges(); calls != 2 || c != 1 {
		t.Fatalf("%d provider calls, %d charges; want 2, 1", calls, c)
	}
}

// 10. Once a key has expired it names a new operation.
func TestExpiredKeyIsANewOperation(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("expiry@example.com")
	p := e.products()
	body := orderBody(p[0], 1)
	first := e.createOrder(token, "old-key", body)

	e.clock.Advance(ttl - time.Second)
	if r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("old-key"), body: body}); !r.replayed() {
		t.Fatalf("before expiry the key must replay: %d", r.Status)
	}
	e.clock.Advance(2 * time.Second)
	r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("old-key"), body: body})
	if r.Status != http.StatusCreated || r.replayed() || r.json(t)["id"] == first {
		t.Fatalf("after expiry: %d replayed=%v %s", r.Status, r.replayed(), r.Body)
	}
	// A different body is fine too once the key has expired: it is new.
	e.clock.Advance(ttl + time.Second)
	if r := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("old-key"), body: orderBody(p[1], 5)}); r.Status != http.StatusCreated || r.replayed() {
		t.Fatalf("expired key, new body: %d %s", r.Status, r.Body)
	}
	if n, keys := e.count("orders"), e.count("idempotency_keys"); n != 3 || keys != 1 {
		t.Fatalf("%d orders, %d keys; want 3, 1", n, keys)
	}
}

// A released key keeps its operation: when an attempt charged but failed to
// learn it, the retry with the same key gets the provider's first charge
// back instead of making a second one. Its attempt stays in doubt, so a
// payment with another key asks the provider about it first, under its own
// key, records the charge, and is told the order is paid.
func TestRetryAfterALostProviderReplyChargesOnce(t *testing.T) {
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider {
		return &failing{Provider: p, err: context.DeadlineExceeded, afterCharge: true, n: 1}
	}))
	token := e.signUp("lost@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay"), body: payBody(payments.MethodVisa)}

	isProblem(t, e.do(pay), http.StatusBadGateway, "/problems/payment-unconfirmed")
	if c, pays := e.charges(), e.count("payments"); c != 1 || pays != 0 {
		t.Fatalf("after the lost reply: %d charges, %d payments; want 1, 0", c, pays)
	}
	if n := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.InDoubt); n != 1 {
		t.Fatalf("%d attempts in doubt after the lost reply, want 1", n)
	}
	other := pay
	other.key = key("pay-other")
	isProblem(t, e.do(other), http.StatusConflict, "/problems/order-already-paid")
	if c, pays, paid := e.charges(), e.count("payments"), e.count("orders", "id = ? AND status = ?", orderID, "paid"); c != 1 || pays != 1 || paid != 1 {
		t.Fatalf("after another key: %d charges, %d payments, %d paid; want 1, 1, 1", c, pays, paid)
	}
	e.answeredWithTheCharge(e.do(pay), "the retry")
	if c, pays, calls := e.charges(), e.count("payments"), e.provider.Calls(); c != 1 || pays != 1 || calls != 2 {
		t.Fatalf("%d charges, %d payments, %d provider calls; want 1, 1, 2", c, pays, calls)
	}
}

// signalling tells when the provider has been called, then lets it answer
// once resumed.
type signalling struct {
	payments.Provider
	called, resume chan struct{}
}

func (s *signalling) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	close(s.called)
	<-s.resume
	return s.Provider.Charge(ctx, req)
}

// A client that hangs up mid-request does not cancel the operation: it
// completes and is recorded, and the retry gets the replay.
func TestClientDisconnectDoesNotCancelTheOperation(t *testing.T) {
	provider := &signalling{called: make(chan struct{}), resume: make(chan struct{})}
	// The retry waits for the original, however long a loaded machine
	// makes it: it is woken when the original ends.
	e := newEnv(t, withWait(20*time.Second), withProvider(func(p payments.Provider) payments.Provider {
		provider.Provider = p
		return provider
	}))
	// After the server, so that it runs before the server's cleanup waits
	// for the held payment.
	var resumeOnce sync.Once
	resume := func() { resumeOnce.Do(func() { close(provider.resume) }) }
	t.Cleanup(resume)
	token := e.signUp("hangup@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	path := "/api/v1/orders/" + orderID + "/payments"

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+path, strings.NewReader(payBody(payments.MethodVisa)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "hangup")
	errc := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	testkit.Recv(t, provider.called, "the payment at the provider")
	cancel()
	if err := testkit.Recv(t, errc, "the client to hang up"); err == nil {
		t.Fatal("the client got an answer before it hung up")
	}
	// Only now, the client gone, does the provider answer.
	resume()
	retry := e.do(request{method: "POST", path: path, token: token, key: key("hangup"), body: payBody(payments.MethodVisa)})
	if retry.Status != http.StatusCreated || !retry.replayed() {
		t.Fatalf("retry: %d replayed=%v %s", retry.Status, retry.replayed(), retry.Body)
	}
	if c, pays, calls := e.charges(), e.count("payments"), e.provider.Calls(); c != 1 || pays != 1 || calls != 1 {
		t.Fatalf("%d charges, %d payments, %d provider calls; want 1, 1, 1", c, pays, calls)
	}
}
