package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	refclient "github.com/shop/shop/client"
	shopclient "github.com/shop/shop/clients/go"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
)

var linearizabilityDuration = flag.Duration("linearizability.duration", 0,
	"how long TestHistoriesAreLinearizable drives the servers (its short form, for CI, when 0)")

// Several clients — the reference client, each call one operation with its
// retries — place and pay orders over a few keys at once, on two instances
// of the real server sharing one database, while one instance is killed
// with -9 and restarted, and (on PostgreSQL) the other's database link is
// cut and restored. Every call, its return and its answer are recorded
// (an answer that never came is an unknown outcome), and porcupine checks
// that a one-at-a-time shop could have given those answers: see
// contractModel. A failing history is drawn to an HTML file.
func TestHistoriesAreLinearizable(t *testing.T) {
	run := linearizabilityRun{duration: 20 * time.Second, faultEvery: 6 * time.Second}
	if *linearizabilityDuration > 0 {
		run.duration, run.faultEvery = *linearizabilityDuration, 15*time.Second
	}
	h := run.record(t, shopBinary(t))
	result, info := porcupine.CheckOperationsVerbose(contractModel, h.ops, 2*time.Minute)
	t.Logf("%d operations over %d orders (%d answered 422 key reused, %d out-of-stock, %d with an unknown outcome); %d faults; porcupine: %s",
		h.requests, h.slots, h.count(mismatch), h.outOfStock(), h.unknown, h.faults, result)
	if result != porcupine.Ok {
		t.Fatalf("the history is not linearizable (%s): drawn in %s%s", result, visualize(t, contractModel, info), illegalOrders(h.ops))
	}
	result, info = porcupine.CheckOperationsVerbose(stockModel, h.ops, 2*time.Minute)
	t.Logf("stock: porcupine: %s", result)
	if result != porcupine.Ok {
		t.Fatalf("the history of the scarce product's stock is not linearizable (%s): drawn in %s", result, visualize(t, stockModel, info))
	}
	if h.outOfStock() == 0 {
		t.Fatalf("no order was refused out-of-stock: the rounds' few units never ran short, and the stock model checked no race for them")
	}
	h.auditMoney(t)
}

// linearizabilityRun is one run's shape: how long the clients work, and
// how often a fault comes.
type linearizabilityRun struct {
	duration, faultEvery time.Duration
	noFaults             bool
}

// history is what a run recorded.
type history struct {
	ops                              []porcupine.Operation
	requests, slots, unknown, faults int
	e                                *env
}

const (
	linClients       = 6
	linSlotsPerRound = 3 // orders placed at once, racing for the few units of one product
	payKeys          = 3 // payment keys per order, each a different client's idea of paying it
)

// opInput is one operation: on an order's slot, its create key (key 0)
// or one of its payment keys, with one of two bodies (variant 0 or 1). A
// hold is no request of its own but what one may have done on the way to
// its final answer: see withHolds.
type opInput struct {
	slot, key, variant int
	hold               bool
	// restock: no request but the harness setting the scarce product's
	// units left to units, between rounds (see stockModel).
	restock bool
	units   int
}

type outcome int

const (
	answered outcome = iota // a final answer
	mismatch                // 422: the key was first used with another body
	unknown                 // no final answer: it may or may not have happened
)

type opOutput struct {
	outcome outcome
	status  int
	answer  string // the status and a hash of the body: what a replay repeats
	about   string // the problem type, or the order or payment id
}

func (h *history) outOfStock() int {
	n := 0
	for _, op := range h.ops {
		if out := op.Output.(opOutput); out.outcome == answered && out.about == "out-of-stock" {
			n++
		}
	}
	return n
}

func (h *history) count(o outcome) int {
	n := 0
	for _, op := range h.ops {
		if op.Output.(opOutput).outcome == o {
			n++
		}
	}
	return n
}

// record runs the clients and the faults and returns the history.
func (run linearizabilityRun) record(t *testing.T, binary string) *history {
	databaseURL := testkit.URL(t)
	a, b := newInstance(t, binary, "A", databaseURL), newInstance(t, binary, "B", databaseURL)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: a.process().URL}
	token := e.signUp("linearizable@example.com")
	products := e.products()
	h := &history{e: e}
	rec := &recorder{start: time.Now()}

	ctx, cancel := context.WithTimeout(t.Context(), run.duration)
	defer cancel()
	var faults sync.WaitGroup
	if !run.noFaults {
		faults.Go(func() { h.faults = injectFaults(ctx, t, run.faultEvery, a, b) })
	}
	for r := 0; ctx.Err() == nil; r++ {
		rec.restock(t, e, products[0], 1+r%linSlotsPerRound)
		var round sync.WaitGroup
		start := make(chan struct{})
		for g := range linSlotsPerRound {
			slot, s := r*linSlotsPerRound+g, &slotOrder{}
			h.slots++
			for c := range linClients {
				round.Go(func() {
					<-start
					w := linWorker{id: g*linClients + c, token: token, rec: rec, instances: [2]*instance{a, b}, rng: rand.New(rand.NewPCG(uint64(slot), uint64(c)))}
					w.round(t, slot, s, products)
				})
			}
		}
		close(start)
		round.Wait()
	}
	faults.Wait()
	h.ops, h.requests, h.unknown = withHolds(rec.ops), len(rec.ops), rec.unknown
	return h
}

// restock sets the units left of the product every order buys, as staff
// would, and records it: each round's orders race for these few units.
func (r *recorder) restock(t *testing.T, e *env, productID string, units int) {
	call := r.now()
	if err := e.db.Model(&models.Product{}).Where("id = ?", productID).Update("stock", units).Error; err != nil {
		t.Fatalf("restock: %v", err)
	}
	r.add(porcupine.Operation{ClientId: linClients * linSlotsPerRound, Input: opInput{slot: -1, restock: true, units: units},
		Call: call, Output: opOutput{outcome: answered}, Return: r.now(), Metadata: "harness"})
}

// withHolds adds, for each operation on a key that was sent with both
// bodies, a hold: that one of its tries may have held the key from its
// call on. One operation is several tries, and a try that ended without a
// stored answer (a 409 "payment in progress", a 5xx) released the key,
// which the other body may then take; meanwhile it was refused with 422.
func withHolds(ops []porcupine.Operation) []porcupine.Operation {
	type slotKey struct{ slot, key int }
	variants := map[slotKey]uint8{}
	for _, op := range ops {
		if in := op.Input.(opInput); !in.restock {
			variants[slotKey{in.slot, in.key}] |= 1 << in.variant
		}
	}
	out := ops
	for _, op := range ops {
		in := op.Input.(opInput)
		if variants[slotKey{in.slot, in.key}] == 3 {
			in.hold = true
			out = append(out, porcupine.Operation{ClientId: op.ClientId, Input: in, Call: op.Call,
				Output: opOutput{outcome: unknown}, Return: math.MaxInt64, Metadata: op.Metadata})
		}
	}
	return out
}

// slotOrder is the order a slot's create key made, once a client knows it.
type slotOrder struct {
	mu sync.Mutex
	id string
}

func (s *slotOrder) learn(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == "" {
		s.id = id
	}
	return s.id
}

// linWorker is one client: per round, it places the slot's order (now and
// then with another body), pays it under one of the slot's payment keys
// (now and then with another card), and sometimes asks for the order again.
type linWorker struct {
	id        int
	token     string
	rec       *recorder
	instances [2]*instance
	rng       *rand.Rand
}

func (w linWorker) round(t *testing.T, slot int, s *slotOrder, products []string) {
	create := func(variant int) {
		body := shopclient.OrderInput{Items: []shopclient.OrderLine{{ProductId: products[0], Quantity: 1 + variant}}}
		out := w.call(t, opInput{slot: slot, key: 0, variant: variant}, func(c *shopclient.ClientWithResponses, key string) (*http.Response, error) {
			return c.CreateOrder(t.Context(), &shopclient.CreateOrderParams{IdempotencyKey: key}, body)
		})
		if out.outcome == answered && out.status == http.StatusCreated {
			s.learn(out.about)
		}
	}
	create(w.variant())
	orderID := s.learn("")
	if orderID == "" {
		return // the order's outcome is unknown to everyone so far
	}
	payKey, variant := 1+w.rng.IntN(payKeys), w.variant()
	method := []string{"pm_card_visa", "pm_card_mastercard"}[variant]
	w.call(t, opInput{slot: slot, key: payKey, variant: variant}, func(c *shopclient.ClientWithResponses, key string) (*http.Response, error) {
		return c.CreatePayment(t.Context(), orderID, &shopclient.CreatePaymentParams{IdempotencyKey: key}, shopclient.PaymentInput{PaymentMethod: shopclient.PaymentInputPaymentMethod(method)})
	})
	if w.rng.IntN(3) == 0 {
		create(0) // a late retry: the answer must be the first one
	}
}

// variant is the usual body (0), or now and then another one (1).
func (w linWorker) variant() int {
	if w.rng.IntN(8) == 0 {
		return 1
	}
	return 0
}

// call makes one operation through the reference client, on either
// instance, and records it.
func (w linWorker) call(t *testing.T, in opInput, op func(*shopclient.ClientWithResponses, string) (*http.Response, error)) opOutput {
	inst := w.instances[w.rng.IntN(2)]
	c, err := refclient.New("http://"+inst.name, w.token, refclient.WithHTTPClient(inst.client),
		refclient.WithPolicy(refclient.Policy{MaxElapsed: 20 * time.Second, Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond, TryTimeout: 10 * time.Second}))
	if err != nil {
		t.Error(err)
		return opOutput{outcome: unknown}
	}
	key := fmt.Sprintf("lin-%d-%d", in.slot, in.key)
	call := w.rec.now()
	resp, err := op(c, key)
	out := outputOf(resp, err)
	if out.outcome == unknown && t.Context().Err() == nil {
		t.Logf("client %d, %s on %s: outcome unknown: %v", w.id, key, inst.name, err)
	}
	w.rec.add(porcupine.Operation{ClientId: w.id, Input: in, Call: call, Output: out, Return: w.rec.now(), Metadata: inst.name})
	return out
}

func outputOf(resp *http.Response, err error) opOutput {
	if err != nil {
		return opOutput{outcome: unknown}
	}
	answer, _ := io.ReadAll(resp.Body) // read already by the client: bytes in memory
	var body struct{ ID, Type string }
	_ = json.Unmarshal(answer, &body)
	sum := sha256.Sum256(answer)
	out := opOutput{outcome: answered, status: resp.StatusCode, answer: fmt.Sprintf("%d:%s", resp.StatusCode, hex.EncodeToString(sum[:6])), about: body.ID}
	if body.Type != "" {
		out.about = strings.TrimPrefix(body.Type, "/problems/")
	}
	if resp.StatusCode == http.StatusUnprocessableEntity && out.about == "idempotency-key-reused" {
		out.outcome = mismatch
	}
	return out
}

// recorder collects the operations, timed from the run's start.
type recorder struct {
	start   time.Time
	mu      sync.Mutex
	ops     []porcupine.Operation
	unknown int
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(op porcupine.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if op.Output.(opOutput).outcome == unknown {
		op.Return = math.MaxInt64 // it may take effect at any time after its call
		r.unknown++
	}
	r.ops = append(r.ops, op)
}

// instance is one server process, restarted on a new port after a kill;
// its clients reach it by name (http://A/...) wherever it runs now.
type instance struct {
	t        *testing.T
	name     string
	binary   string
	settings []string
	link     *testkit.Link // the database link, on PostgreSQL
	current  atomic.Pointer[testkit.Process]
	client   *http.Client
}

func newInstance(t *testing.T, binary, name, databaseURL string) *instance {
	i := &instance{t: t, name: name, binary: binary}
	if u, err := url.Parse(databaseURL); err == nil && strings.HasPrefix(u.Scheme, "postgres") {
		i.link = testkit.NewLink(t, u.Host)
		u.Host = i.link.Addr
		databaseURL = u.String()
	}
	i.settings = []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=2s", "IDEMPOTENCY_WAIT=1s",
		"PAYMENT_LATENCY=20ms", "PAYMENT_RECONCILE_EVERY=1s", "CREDENTIALS_PER_MINUTE=0"}
	var dialer net.Dialer
	i.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, strings.TrimPrefix(i.process().URL, "http://"))
		},
	}}
	i.start()
	t.Cleanup(func() {
		i.process().Kill()
		if t.Failed() {
			t.Logf("output of instance %s:\n%s", name, i.process().Output())
		}
	})
	return i
}

func (i *instance) process() *testkit.Process { return i.current.Load() }

func (i *instance) start() {
	p, err := testkit.Start(i.binary, i.t.TempDir(), i.settings...)
	if err != nil {
		i.t.Errorf("instance %s: %v", i.name, err)
		return
	}
	i.current.Store(p)
}

// injectFaults takes turns, every faultEvery until ctx ends: kill -9 of A
// and its restart; then, on PostgreSQL, B's database link cut for a
// second (on SQLite, kill -9 of B). It returns how many it injected.
func injectFaults(ctx context.Context, t *testing.T, every time.Duration, a, b *instance) int {
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n
		case <-time.After(every):
		}
		switch {
		case n%2 == 0:
			a.process().Kill()
			a.start()
		case b.link != nil:
			b.link.Cut()
			time.Sleep(time.Second)
			b.link.Restore()
		default:
			b.process().Kill()
			b.start()
		}
		n++
		t.Logf("fault %d injected at %v", n, time.Now().Format(time.TimeOnly))
	}
}

// auditMoney checks the tables once the reconciler has resolved what the
// faults left in doubt: at most one charge per order, one per paid order,
// none unrecorded.
func (h *history) auditMoney(t *testing.T) {
	var audit testkit.MoneyAudit
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if audit, err = testkit.AuditMoney(h.e.db); err != nil {
			t.Fatal(err)
		}
		if len(audit.Violations) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(audit.Violations) > 0 {
		t.Fatalf("money audit: %d orders, %d paid, %d charges; violations:\n%s", audit.Orders, audit.PaidOrders, audit.Charges, strings.Join(audit.Violations, "\n"))
	}
	if audit.PaidOrders == 0 || audit.Orders > int64(h.slots) {
		t.Fatalf("money audit: %d orders for %d slots, %d paid; want at most one order per slot, and some paid", audit.Orders, h.slots, audit.PaidOrders)
	}
	t.Logf("money audit: %d orders for %d slots, %d paid, %d charges", audit.Orders, h.slots, audit.PaidOrders, audit.Charges)
}

// illegalOrders describes, operation by operation, each order whose own
// history is not linearizable.
func illegalOrders(ops []porcupine.Operation) string {
	var b strings.Builder
	for _, part := range contractModel.Partition(ops) {
		if porcupine.CheckOperations(contractModel, part) {
			continue
		}
		fmt.Fprintf(&b, "\norder %d:", part[0].Input.(opInput).slot)
		for _, op := range part {
			ret := "never"
			if op.Return != math.MaxInt64 {
				ret = time.Duration(op.Return).String()
			}
			fmt.Fprintf(&b, "\n  client %d on %v, %v → %s: %s", op.ClientId, op.Metadata, time.Duration(op.Call), ret,
				contractModel.DescribeOperation(op.Input, op.Output))
		}
	}
	return b.String()
}

// visualize draws the history and its longest linearizable prefixes to an
// HTML file that outlives the test (LINEARIZABILITY_OUT, or the temporary
// directory) and returns its path.
func visualize(t *testing.T, model porcupine.Model, info porcupine.LinearizationInfo) string {
	dir := os.Getenv("LINEARIZABILITY_OUT")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("shop-linearizability-%s.html", time.Now().Format("20060102-150405")))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Errorf("drawing the history: %v", err)
	}
	return path
}
