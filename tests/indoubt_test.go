package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/handlers"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// The money rule, whatever keys are used: at most one successful charge per
// order, and a charge the provider took is always recorded. Each test here
// leaves a payment attempt in doubt — the provider charged or may charge,
// and the shop did not learn it — and then pays the order with other keys,
// or lets the reconciler find it. Each asserts the provider's own ledger.

// frozenCharge freezes the first payment once the provider has charged and
// before it answers (withAfterCharge): the database is left as a process that died
// there leaves it. The lease is an hour so that the frozen attempt's
// heartbeat does not tick while the test runs, as a dead process's would
// not; the test's clock moves past it instead. The frozen payment is let go
// when the test ends, before any cleanup runs: the servers' cleanups, which
// wait for it, are registered after this one and would run first, so a
// failing test would hang in them instead of failing.
type frozenCharge struct {
	once            sync.Once
	crashed, resume chan struct{}
	resumeOnce      sync.Once
}

func newFrozenCharge(t *testing.T) (*frozenCharge, option) {
	f := &frozenCharge{crashed: make(chan struct{}), resume: make(chan struct{})}
	return f, withAfterCharge(func() {
		first := false
		f.once.Do(func() { first = true })
		if first {
			close(f.crashed)
			select {
			case <-f.resume:
			case <-t.Context().Done():
			}
		}
	})
}

func (f *frozenCharge) letGo() { f.resumeOnce.Do(func() { close(f.resume) }) }

const hourLease = time.Hour

// paidOnce asserts the provider's ledger, the payments and the order: one
// succeeded charge, recorded once, the order paid.
func (e *env) paidOnce(when, orderID string) {
	e.t.Helper()
	charges, payments := e.charges(), e.count("payments", "order_id = ? AND status = ?", orderID, "succeeded")
	paid := e.count("orders", "id = ? AND status = ?", orderID, "paid")
	doubts := e.count("payment_attempts", "order_id = ? AND state = ?", orderID, models.InDoubt)
	if charges != 1 || payments != 1 || paid != 1 || doubts != 0 {
		e.t.Fatalf("%s: %d succeeded charges at the provider, %d succeeded payments, order paid %v, %d attempts in doubt; want 1, 1, true, 0",
			when, charges, payments, paid == 1, doubts)
	}
}

// answeredWithTheCharge asserts that r is a 201 whose payment is the one
// charge in the provider's ledger: the operation's own, first charge.
func (e *env) answeredWithTheCharge(r response, who string) {
	e.t.Helper()
	if r.Status != http.StatusCreated {
		e.t.Fatalf("%s: %d %s; want 201 with its charge", who, r.Status, r.Body)
	}
	var charges []string
	e.db.Table("simulated_charges").Pluck("id", &charges)
	if got := r.json(e.t)["provider_charge_id"]; len(charges) != 1 || got != charges[0] {
		e.t.Fatalf("%s was answered with charge %v; the provider's ledger holds %v", who, got, charges)
	}
}

func (e *env) payRequest(token, orderID, k, method string) request {
	return request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key(k), body: payBody(method)}
}

// Repro A, in one process: the first payment is charged and dies before it
// commits. Once its hold has lapsed, a payment with a new key — a shopper
// who reopened the order page — is told the order is paid: it asked the
// provider about the earlier attempt under that attempt's key, and recorded
// its charge, instead of charging again. The first key's retry is answered
// with the payment its own charge made.
func TestNewKeyAfterACrashedChargeIsToldTheOrderIsPaid(t *testing.T) {
	frozen, freeze := newFrozenCharge(t)
	e := newEnv(t, withLease(hourLease), withWait(50*time.Millisecond), freeze)
	token := e.signUp("repro-a@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 2))
	first := e.payRequest(token, orderID, "k1", payments.MethodVisa)

	dead := e.async(first)
	testkit.Recv(t, frozen.crashed, "the first payment to die after the charge")
	if e.charges() != 1 || e.count("payments") != 0 || e.count("payment_attempts", "state = ?", models.InDoubt) != 1 {
		t.Fatal("after the crash: want the charge made, nothing recorded, the attempt in doubt")
	}
	// Within the hold, another key is told a payment is being confirmed.
	r := e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa))
	isProblem(t, r, http.StatusConflict, "/problems/payment-in-progress")
	if e.provider.Calls() != 1 {
		t.Fatalf("%d provider calls while the hold lasted, want 1", e.provider.Calls())
	}

	e.clock.Advance(hourLease + time.Second)
	isProblem(t, e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)), http.StatusConflict, "/problems/order-already-paid")
	e.paidOnce("after a new key", orderID)
	var attempt models.PaymentAttempt
	if err := e.db.Where("order_id = ?", orderID).Take(&attempt).Error; err != nil {
		t.Fatal(err)
	}
	if n := e.count("simulated_charges", "idempotency_key <> ?", attempt.ProviderKey); n != 0 {
		t.Fatalf("%d provider requests under another key than the first attempt's", n)
	}
	// The new key's answer is final: replayed, with no provider call.
	calls := e.provider.Calls()
	if again := e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)); again.Status != http.StatusConflict || !again.replayed() {
		t.Fatalf("the new key again: %d replayed=%v", again.Status, again.replayed())
	}

	e.answeredWithTheCharge(e.do(first), "the first key's retry")
	if e.provider.Calls() != calls {
		t.Fatalf("the first key's retry called the provider again")
	}
	e.paidOnce("after the first key's retry", orderID)

	// The dead attempt comes back: fenced, it records nothing more.
	frozen.letGo()
	late := testkit.Recv(t, dead, "the dead attempt's answer")
	if late.err != nil {
		t.Fatal(late.err)
	}
	isProblem(t, late.response, http.StatusConflict, "/problems/idempotency-lease-lost")
	e.paidOnce("after the dead attempt", orderID)
}

// Repro B: the first payment's own provider call is still in flight when
// its hold lapses (its instance lost its database link, so the heartbeat
// could not extend the hold), and another instance pays the order with a
// new key. The new key must not charge: it sends the first attempt's
// request again under the first attempt's key, which the provider answers
// once for both. On PostgreSQL the first instance reaches the database
// through a proxy that the test cuts while the call is in flight.
func TestNewKeyWhileTheFirstChargeIsInFlightChargesOnce(t *testing.T) {
	provider := &blockingProvider{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, withLease(hourLease), withWait(50*time.Millisecond), withProvider(func(p payments.Provider) payments.Provider {
		provider.Provider = p
		return provider
	}))
	a := e.instanceThroughLink()
	// Registered after instance A's server, so that it runs before that
	// server's cleanup waits for the held payment.
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(provider.release) }) }
	t.Cleanup(letGo)
	token := e.signUp("repro-b@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[1], 1))

	first := e.payRequest(token, orderID, "k1", payments.MethodVisa)
	onA := a.async(first)
	testkit.Recv(t, provider.entered, "the first payment at the provider")
	a.cut()
	e.clock.Advance(hourLease + time.Second)

	// Instance B: the new key resolves the first attempt (its own call at
	// the provider is still held), records the charge, and is told the
	// order is paid.
	isProblem(t, e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)), http.StatusConflict, "/problems/order-already-paid")
	e.paidOnce("after the new key", orderID)

	a.restore()
	letGo()
	fromA := testkit.Recv(t, onA, "the first payment's answer")
	if fromA.err != nil {
		t.Fatal(fromA.err)
	}
	if fromA.Status != http.StatusCreated {
		t.Fatalf("the first payment answered %d %s; want 201 with its charge", fromA.Status, fromA.Body)
	}
	e.paidOnce("after the first payment returned", orderID)
	if n := e.count("simulated_charges"); n != 1 {
		t.Fatalf("%d provider ledger rows, want 1", n)
	}
}

// The provider cannot answer the resolution: the new key gets 502, nothing
// is charged under it, and the attempt stays in doubt. A later retry of the
// new key resolves it and is told the order is paid.
func TestUnanswerableResolutionChargesNothingNew(t *testing.T) {
	flaky := &failing{err: errors.New("connection reset by peer"), afterCharge: true, n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { flaky.Provider = p; return flaky }))
	token := e.signUp("unanswered@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[2], 1))

	// The first payment charges and loses the reply: in doubt.
	isProblem(t, e.do(e.payRequest(token, orderID, "k1", payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")
	// The provider now fails before reaching its ledger, once.
	flaky.mu.Lock()
	flaky.n, flaky.afterCharge = 1, false
	flaky.mu.Unlock()
	second := e.payRequest(token, orderID, "k2", payments.MethodVisa)
	r := e.do(second)
	isProblem(t, r, http.StatusBadGateway, "/problems/payment-unconfirmed")
	if got := r.json(t)["detail"]; got != models.ErrPaymentInDoubt.Message {
		t.Fatalf("detail %q, want the being-confirmed message", got)
	}
	if c, pays, doubts := e.charges(), e.count("payments"), e.count("payment_attempts", "state = ?", models.InDoubt); c != 1 || pays != 0 || doubts != 1 {
		t.Fatalf("after an unanswered resolution: %d charges, %d payments, %d in doubt; want 1, 0, 1", c, pays, doubts)
	}
	order := e.do(request{method: "GET", path: "/api/v1/orders/" + orderID, token: token}).json(t)
	if attempts := order["attempts"].([]any); len(attempts) != 1 || attempts[0].(map[string]any)["state"] != string(models.InDoubt) {
		t.Fatalf("the order's attempts: %v; want one in_doubt", order["attempts"])
	}

	isProblem(t, e.do(second), http.StatusConflict, "/problems/order-already-paid")
	e.paidOnce("after the retry", orderID)
	if n := e.count("payment_attempts"); n != 1 {
		t.Fatalf("%d attempts, want only the first: the new key never reached the provider", n)
	}
}

// Twenty payments with twenty keys, at once, while an earlier attempt is
// in doubt: one charge.
func TestManyKeysOnAnOrderInDoubtChargeOnce(t *testing.T) {
	frozen, freeze := newFrozenCharge(t)
	e := newEnv(t, withLease(hourLease), withWait(0), freeze)
	token := e.signUp("hammer@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[3], 3))
	dead := e.async(e.payRequest(token, orderID, "k0", payments.MethodVisa))
	testkit.Recv(t, frozen.crashed, "the first payment to die after the charge")
	e.clock.Advance(hourLease + time.Second)

	var rs []request
	for i := 1; i <= 20; i++ {
		rs = append(rs, e.payRequest(token, orderID, fmt.Sprintf("k%d", i), payments.MethodVisa))
	}
	for _, r := range e.concurrently(rs) {
		if r.Status != http.StatusConflict && r.Status != http.StatusCreated {
			t.Fatalf("a new key got %d %s; want 409 (paid, or a payment being confirmed)", r.Status, r.Body)
		}
		if r.Status == http.StatusCreated {
			t.Fatalf("a new key was answered with a payment: %s", r.Body)
		}
	}
	e.paidOnce("after twenty keys", orderID)
	if n := e.count("payment_attempts"); n != 1 {
		t.Fatalf("%d attempts, want only the first", n)
	}
	frozen.letGo()
	testkit.Recv(t, dead, "the dead attempt's answer")
	e.paidOnce("after the dead attempt", orderID)
}

// A charge taken by a payment that died is recorded by the reconciler, the
// order paid, although nobody retries; two instances reconciling the same
// attempt at once resolve it once.
func TestReconcilersRecordACrashedChargeOnce(t *testing.T) {
	frozen, freeze := newFrozenCharge(t)
	e := newEnv(t, withLease(hourLease), freeze)
	token := e.signUp("reconcile@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	dead := e.async(e.payRequest(token, orderID, "k1", payments.MethodVisa))
	testkit.Recv(t, frozen.crashed, "the payment to die after the charge")

	// Within the hold the attempt's own operation may still finish: the
	// reconciler leaves it alone.
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 0 {
		t.Fatalf("reconcile within the hold: %d resolved, %v; want 0", n, err)
	}
	e.clock.Advance(hourLease + time.Second)
	other := newServer(t, e.deps)
	var wg sync.WaitGroup
	resolved := make([]int, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	for i, s := range []*handlers.Server{e.server, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resolved[i], errs[i] = s.Payments().Reconcile(context.Background())
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if resolved[0]+resolved[1] != 1 {
		t.Fatalf("the reconcilers resolved %v attempts, want 1 in all", resolved)
	}
	e.paidOnce("after two reconcilers", orderID)
	if n := e.count("payments"); n != 1 {
		t.Fatalf("%d payment rows, want 1", n)
	}
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 0 {
		t.Fatalf("a second pass resolved %d, %v; want nothing left", n, err)
	}
	// Each resolution is counted by outcome, once in all.
	counted := 0
	for _, s := range []*handlers.Server{e.server, other} {
		rec := httptest.NewRecorder()
		scrape := httptest.NewRequest("GET", "/metrics", nil)
		scrape.RemoteAddr = "127.0.0.1:9090" // a scraper on this machine: no token needed
		s.ServeHTTP(rec, scrape)
		if strings.Contains(rec.Body.String(), `shop_payment_resolutions_total{by="reconciler",outcome="succeeded"} 1`) {
			counted++
		}
	}
	if counted != 1 {
		t.Fatalf("%d servers counted the resolution, want 1", counted)
	}
	frozen.letGo()
	testkit.Recv(t, dead, "the dead attempt's answer")
	e.paidOnce("after the dead attempt", orderID)
	wantEventPerFact(t, e.db, outbox.OrderPaid, 1)
}

// A refusal of a resolution — rate limited, unauthorized, unavailable —
// comes before the provider's idempotency layer and says nothing about the
// attempt's first request, which here was charged: the attempt stays in
// doubt however long the refusals go on, and no other key charges.
func TestARefusedResolutionNeverSettlesAnAttempt(t *testing.T) {
	refusing := &failing{err: payments.ErrUnavailable}
	lost := &failing{Provider: refusing, err: errors.New("read: connection reset by peer"), afterCharge: true, n: 1}
	e := newEnv(t, withLease(time.Minute), withProvider(func(p payments.Provider) payments.Provider { refusing.Provider = p; return lost }))
	token := e.signUp("refused@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	isProblem(t, e.do(e.payRequest(token, orderID, "k1", payments.MethodVisa)), http.StatusBadGateway, "/problems/payment-unconfirmed")
	refusing.mu.Lock()
	refusing.n = 4 // the provider now refuses every request, for a while
	refusing.mu.Unlock()
	for range 2 {
		if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 0 {
			t.Fatalf("reconcile while refused: %d resolved, %v; want 0", n, err)
		}
		// Past the attempt's hold, within the roll-forward window: the
		// attempt is sent again, and refused.
		e.clock.Advance(5 * time.Minute)
	}
	second := e.payRequest(token, orderID, "k2", payments.MethodVisa)
	for range 2 {
		isProblem(t, e.do(second), http.StatusBadGateway, "/problems/payment-unconfirmed")
	}
	if c, doubts, attempts := e.charges(), e.count("payment_attempts", "state = ?", models.InDoubt), e.count("payment_attempts"); c != 1 || doubts != 1 || attempts != 1 {
		t.Fatalf("after refused resolutions: %d charges, %d in doubt, %d attempts; want 1, 1, 1", c, doubts, attempts)
	}
	// The provider answers again: the first charge is recorded, once.
	isProblem(t, e.do(second), http.StatusConflict, "/problems/order-already-paid")
	e.paidOnce("once the provider answers", orderID)
}

// Two runs of one operation: the first run's request is slow, its lease
// passes, and a retry with the same key takes the key over and sends the
// attempt's request again. The first run's late refusal must not mark the
// attempt failed under the run that took over, whose request charges: the
// hold belongs to a run, not to the operation.
func TestALateRunCannotFailTheAttemptOfTheRunThatTookOver(t *testing.T) {
	provider := &twoRuns{first: make(chan struct{}), second: make(chan struct{}), releaseFirst: make(chan struct{}), releaseSecond: make(chan struct{})}
	e := newEnv(t, withLease(hourLease), withWait(0), withProvider(func(p payments.Provider) payments.Provider { provider.Provider = p; return provider }))
	t.Cleanup(provider.letGo)
	token := e.signUp("two-runs@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[1], 1))
	pay := e.payRequest(token, orderID, "k1", payments.MethodVisa)

	firstRun := e.async(pay)
	testkit.Recv(t, provider.first, "the first run at the provider")
	e.clock.Advance(hourLease + time.Second)
	secondRun := e.async(pay)
	testkit.Recv(t, provider.second, "the second run at the provider")
	close(provider.releaseFirst) // the first run is refused, late
	late := testkit.Recv(t, firstRun, "the first run's answer")
	if late.err != nil {
		t.Fatal(late.err)
	}
	close(provider.releaseSecond)
	took := testkit.Recv(t, secondRun, "the second run's answer")
	if took.err != nil || took.Status != http.StatusCreated {
		t.Fatalf("the run that took over: %v %d %s", took.err, took.Status, took.Body)
	}
	e.paidOnce("after both runs", orderID)
	isProblem(t, e.do(e.payRequest(token, orderID, "k2", payments.MethodVisa)), http.StatusConflict, "/problems/order-already-paid")
	e.paidOnce("after a new key", orderID)
}

// twoRuns holds the first request at the provider and then refuses it, and
// holds the second until the test lets it through to the provider.
type twoRuns struct {
	payments.Provider
	mu                          sync.Mutex
	calls                       int
	first, second               chan struct{}
	releaseFirst, releaseSecond chan struct{}
	once                        sync.Once
}

func (p *twoRuns) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	p.mu.Lock()
	p.calls++
	call := p.calls
	p.mu.Unlock()
	switch call {
	case 1:
		close(p.first)
		<-p.releaseFirst
		return payments.Charge{}, payments.ErrUnavailable
	case 2:
		close(p.second)
		<-p.releaseSecond
	}
	return p.Provider.Charge(ctx, req)
}

func (p *twoRuns) letGo() {
	p.once.Do(func() {
		for _, ch := range []chan struct{}{p.releaseFirst, p.releaseSecond} {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
}

// linked is a second instance of the shop on the same database, which it
// reaches through a link the test can cut. On SQLite the database is a
// file inside the process, with no link to cut: there cut only makes the
// instance's pool let go of its connections.
type linked struct {
	e    *env
	url  string
	link *testkit.Link
	pool *sql.DB
}

func (e *env) instanceThroughLink() *linked {
	e.t.Helper()
	l := &linked{e: e}
	dbURL := e.dbURL
	if u, err := url.Parse(dbURL); err == nil && strings.HasPrefix(u.Scheme, "postgres") {
		l.link = testkit.NewLink(e.t, u.Host)
		u.Host = l.link.Addr
		dbURL = u.String()
	}
	db := testkit.Open(e.t, dbURL)
	pool, err := db.DB()
	if err != nil {
		e.t.Fatal(err)
	}
	l.pool = pool
	deps := e.deps
	deps.DB = db
	srv := httptest.NewServer(newServer(e.t, deps))
	e.t.Cleanup(srv.Close)
	l.url = srv.URL
	return l
}

func (l *linked) async(r request) <-chan answerOf {
	other := *l.e
	other.url = l.url
	return other.async(r)
}

// cut loses the database link: open connections closed, new ones refused.
// The pool keeps no idle connection, so that once the link is restored
// the instance dials anew, as it would after a real outage.
func (l *linked) cut() {
	l.pool.SetMaxIdleConns(0)
	if l.link != nil {
		l.link.Cut()
	}
}

func (l *linked) restore() {
	if l.link != nil {
		l.link.Restore()
	}
}

// The shopper sees the truth: while the first payment is in doubt the order
// page says it is being confirmed, and a new Pay, whose resolution the
// provider cannot answer, gets a page saying so instead of a second charge.
// Once the provider answers, the page shows the order paid.
func TestShopperSeesAPaymentBeingConfirmed(t *testing.T) {
	flaky := &failing{err: errors.New("connection reset by peer"), afterCharge: true, n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { flaky.Provider = p; return flaky }))
	ids := e.products()
	s := e.shopper()
	s.signUp("confirming@example.com")
	orderPath := s.placeOrder(s.checkout(ids[0], 1))

	isPage(t, s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa)), http.StatusBadGateway)
	isPage(t, s.get(orderPath), http.StatusOK, "Your last payment is being confirmed")
	flaky.mu.Lock()
	flaky.n, flaky.afterCharge = 1, false
	flaky.mu.Unlock()
	isPage(t, s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa)), http.StatusBadGateway, "being confirmed")
	if c, pays := e.charges(), e.count("payments"); c != 1 || pays != 0 {
		t.Fatalf("%d charges, %d payments; want the first charge only, not yet recorded", c, pays)
	}
	if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v", n, err)
	}
	isPage(t, s.get(orderPath), http.StatusOK, "Paid.")
	orderID := orderPath[strings.LastIndex(orderPath, "/")+1:]
	e.paidOnce("after the reconciler", orderID)
}
