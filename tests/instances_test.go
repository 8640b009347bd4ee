package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/payments"
)

// operation is one client's order and its payment, each with its own key.
type operation struct {
	create  request
	orderID string
}

func newOperations(e *env, token string, n int) []*operation {
	p := e.products()
	ops := make([]*operation, n)
	for i := range ops {
		ops[i] = &operation{create: request{
			method: "POST", path: "/api/v1/orders", token: token,
			key: key(fmt.Sprintf("order-%d", i)), body: orderBody(p[i%len(p)], 1+i%3),
		}}
	}
	return ops
}

func (o *operation) payment() request {
	return request{
		method: "POST", path: "/api/v1/orders/" + o.orderID + "/payments", token: o.create.token,
		key: key("pay-" + (*o.create.key)[len("order-"):]), body: payBody(payments.MethodVisa),
	}
}

// wantExactlyOnce audits the database: every operation made one order, paid
// once, with one charge, and every key is completed.
func wantExactlyOnce(t *testing.T, e *env, ops []*operation) {
	t.Helper()
	n := int64(len(ops))
	got := e.sideEffects()
	paid := e.count("orders", "status = ?", "paid")
	succeeded := e.count("payments", "status = ?", "succeeded")
	if got.orders != n || paid != n || got.payments != n || succeeded != n || got.charges != n || e.charges() != n || got.storedKeys != 2*n || got.keyRows != 2*n {
		t.Fatalf("%d operations: %+v, %d paid orders, %d succeeded payments; want one order, one payment and one charge each, every key completed", n, got, paid, succeeded)
	}
	for _, o := range ops {
		if e.count("orders", "id = ? AND status = ?", o.orderID, "paid") != 1 {
			t.Fatalf("order %s of %s is not paid", o.orderID, *o.create.key)
		}
	}
}

// Two servers on one database — PostgreSQL, or two processes sharing one
// SQLite file (WAL, busy timeout) — get the two copies of each request at
// the same moment. Each operation still happens once: one copy runs, the
// other waits and replays it.
func TestTwoInstancesOneDatabase(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "PAYMENT_LATENCY=20ms"}
	a, b := startShop(t, "instance A", settings...), startShop(t, "instance B", settings...)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: a.url}
	token := e.signUp("twins@example.com")
	ops := newOperations(e, token, 12)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	// both sends r to A and B at once and checks the pair of answers: the
	// same final answer, exactly one of them the original.
	both := func(r request) (response, error) {
		start := make(chan struct{})
		var answers [2]response
		var errs [2]error
		var pair sync.WaitGroup
		for i, url := range []string{a.url, b.url} {
			pair.Go(func() {
				<-start
				answers[i], errs[i] = untilFinal(ctx, func() string { return url }, r)
			})
		}
		close(start)
		pair.Wait()
		if errs[0] != nil || errs[1] != nil {
			return response{}, fmt.Errorf("%s: %v; %v", *r.key, errs[0], errs[1])
		}
		x, y := answers[0], answers[1]
		if x.Status != http.StatusCreated || y.Status != http.StatusCreated || !bytes.Equal(x.Body, y.Body) || x.replayed() == y.replayed() {
			return response{}, fmt.Errorf("%s: A answered %d (replayed %v) %s; B answered %d (replayed %v) %s",
				*r.key, x.Status, x.replayed(), x.Body, y.Status, y.replayed(), y.Body)
		}
		return x, nil
	}
	errs := make(chan error, len(ops))
	sem := make(chan struct{}, 4)
	for _, o := range ops {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			created, err := both(o.create)
			if err == nil {
				o.orderID, err = created.field("id")
			}
			if err == nil {
				_, err = both(o.payment())
			}
			errs <- err
		}()
	}
	for range ops {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	wantExactlyOnce(t, e, ops)
}

// kill -9 of a real server in the middle of a storm of orders and payments,
// then a restart on the same database: clients retry with their keys until
// they get an answer, and every operation still ends with one order, one
// payment and one charge. Attempts the kill cut short are taken over once
// their (one second) lease passes.
func TestKill9MidStormAndRestart(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=1s", "IDEMPOTENCY_WAIT=300ms", "PAYMENT_LATENCY=30ms"}
	first := startShop(t, "first server", settings...)
	var base atomic.Value
	base.Store(first.url)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: first.url}
	token := e.signUp("kill9@example.com")
	const n, workers = 24, 8
	ops := newOperations(e, token, n)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	server := func() string { return base.Load().(string) }
	// The kill comes when a third of the operations are paid, while the
	// other workers are in the middle of theirs.
	var paid atomic.Int64
	killNow := make(chan struct{})
	queue := make(chan *operation, n)
	for _, o := range ops {
		queue <- o
	}
	close(queue)
	errs := make(chan error, n)
	var fivexx atomic.Int64
	final := func(r request) (response, error) {
		for {
			resp, err := untilFinal(ctx, server, r)
			if err != nil || resp.Status < 500 {
				return resp, err
			}
			fivexx.Add(1) // counted, and retried: a client would
		}
	}
	for range workers {
		go func() {
			for o := range queue {
				created, err := final(o.create)
				if err == nil && created.Status != http.StatusCreated {
					err = fmt.Errorf("%s: %d %s", *o.create.key, created.Status, created.Body)
				}
				if err == nil {
					o.orderID, err = created.field("id")
				}
				if err == nil {
					var p response
					var paidOrder string
					p, err = final(o.payment())
					if err == nil && p.Status == http.StatusCreated {
						paidOrder, err = p.field("order_id")
					}
					if err == nil && (p.Status != http.StatusCreated || paidOrder != o.orderID) {
						err = fmt.Errorf("pay %s: %d %s", o.orderID, p.Status, p.Body)
					}
				}
				if paid.Add(1) == n/3 {
					close(killNow)
				}
				errs <- err
			}
		}()
	}
	<-killNow
	first.kill()
	inFlight := e.count("idempotency_keys", "state = ?", "in_progress")
	second := startShop(t, "restarted server", settings...)
	base.Store(second.url)
	for range ops {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("keys in progress at the kill: %d; 5xx answers: %d", inFlight, fivexx.Load())
	if fivexx.Load() != 0 {
		t.Fatalf("%d 5xx answers, want none", fivexx.Load())
	}
	wantExactlyOnce(t, e, ops)
}
