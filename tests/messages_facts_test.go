package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// wantEventPerFact checks that every fact of the database has its one
// event (testkit.AuditEvents), and that the path the test drove wrote n
// events of type typ.
func wantEventPerFact(t *testing.T, db *gorm.DB, typ string, n int64) {
	t.Helper()
	audit, err := testkit.AuditEvents(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range audit.Violations {
		t.Error(v)
	}
	var got int64
	if err := db.Model(&outbox.Event{}).Where("type = ?", typ).Count(&got).Error; err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("%d %s events; want %d", got, typ, n)
	}
}

// counting is a consumer whose effect is a count, recorded once per event
// through the inbox.
type counting struct {
	mu      sync.Mutex
	handed  map[string]int
	effects map[string]int
}

func (c *counting) Name() string { return "test-counting" }

func (c *counting) Handle(ctx context.Context, db *gorm.DB, ev outbox.Event) error {
	c.mu.Lock()
	c.handed[ev.ID]++
	c.mu.Unlock()
	err := outbox.Once(ctx, db, c.Name(), ev.ID, func(*gorm.DB) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.effects[ev.ID]++
		return nil
	})
	return err
}

// ignoring acts on no event, and records none in its inbox itself.
type ignoring struct{ handed map[string]int }

func (c *ignoring) Name() string { return "test-ignoring" }

func (c *ignoring) Handle(_ context.Context, _ *gorm.DB, ev outbox.Event) error {
	c.handed[ev.ID]++
	return nil
}

// A consumer handed the same event again — JetStream's redelivery, a
// relay that took over after a crash — acts once: its inbox holds. The
// relay hands each event until Handle returns nil, and records it for a
// consumer that had nothing to do with it, so that it is not handed again.
func TestARedeliveredEventActsOnce(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("redelivered@example.com")
	e.createOrder(token, "redelivered", orderBody(e.products()[0], 1))
	events := eventsOf(t, e.db)
	if len(events) != 1 {
		t.Fatalf("%d events after one order; want 1", len(events))
	}
	c := &counting{handed: map[string]int{}, effects: map[string]int{}}
	idle := &ignoring{handed: map[string]int{}}
	relay := outbox.NewRelay(e.db, []outbox.Consumer{c, idle}, outbox.RelayConfig{Interval: 20 * time.Millisecond, Lease: time.Second, Holder: "test", Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	untilRelayed(t, e.db, c.Name(), 1)
	untilRelayed(t, e.db, idle.Name(), 1)
	for range 3 { // redelivered
		if err := c.Handle(t.Context(), e.db, events[0]); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
	if c.effects[events[0].ID] != 1 || c.handed[events[0].ID] < 4 {
		t.Fatalf("handed %d times, acted %d; want acted once however often handed", c.handed[events[0].ID], c.effects[events[0].ID])
	}
	if idle.handed[events[0].ID] != 1 {
		t.Fatalf("the idle consumer was handed the event %d times; want once", idle.handed[events[0].ID])
	}
	if n := e.count("outbox_leases"); n != 0 {
		t.Fatalf("%d leases left after the relay stopped; want it to give them back", n)
	}
}

// blocking is a consumer that records who handed it each event, and holds
// the first until released.
type blocking struct {
	entered, release chan struct{}
	once             sync.Once
	mu               *sync.Mutex
	handed           map[string]string // event id → relay
	relay            string
}

func (c *blocking) Name() string { return "test-blocking" }

func (c *blocking) Handle(_ context.Context, _ *gorm.DB, ev outbox.Event) error {
	c.once.Do(func() { close(c.entered); <-c.release })
	c.mu.Lock()
	defer c.mu.Unlock()
	if by, twice := c.handed[ev.ID]; twice {
		return fmt.Errorf("%s handed %s after %s did", c.relay, ev.ID, by)
	}
	c.handed[ev.ID] = c.relay
	return nil
}

// Two relays on one database: while one holds a consumer's lease, busy
// in its Handle, the other looks at the lease at each poll and hands that
// consumer nothing; the holder hands it every event, once.
func TestOneRelayAtATimeHandsAConsumerItsEvents(t *testing.T) {
	databaseURL := testkit.URL(t)
	db := testkit.Open(t, databaseURL)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := db.Transaction(func(tx *gorm.DB) error {
			return outbox.Record(tx, outbox.OrderPlaced, fmt.Sprint("fact-", i), "order", map[string]int{"n": i})
		}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	handed := map[string]string{}
	consumer := func(relay string) *blocking {
		return &blocking{entered: make(chan struct{}), release: make(chan struct{}), mu: &mu, handed: handed, relay: relay}
	}
	a, b := consumer("a"), consumer("b")
	close(b.release)
	// b's looks at the lease, seen on its own connection pool.
	other := testkit.Open(t, databaseURL)
	tries := make(chan struct{}, 100)
	err := other.Callback().Query().After("gorm:query").Register("test:lease-tries", func(tx *gorm.DB) {
		if tx.Statement.Table == "outbox_leases" {
			select {
			case tries <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(holder string) outbox.RelayConfig {
		return outbox.RelayConfig{Interval: 10 * time.Millisecond, Lease: time.Minute, Holder: holder, Logger: slog.New(slog.DiscardHandler)}
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { outbox.NewRelay(db, []outbox.Consumer{a}, cfg("a")).Run(ctx) })
	testkit.Recv(t, a.entered, "relay a to hand its first event")
	wg.Go(func() { outbox.NewRelay(other, []outbox.Consumer{b}, cfg("b")).Run(ctx) })
	for range 3 {
		testkit.Recv(t, tries, "relay b to try the lease")
	}
	close(a.release)
	untilRelayed(t, db, a.Name(), 3)
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(handed) != 3 {
		t.Fatalf("handed %v; want the 3 events", handed)
	}
	for id, by := range handed {
		if by != "a" {
			t.Errorf("%s was handed by relay %s while relay a held the lease", id, by)
		}
	}
}

// picky is the ignoring consumer made selective: it names the one type it
// acts on.
type picky struct{ ignoring }

func (c *picky) Name() string    { return "test-picky" }
func (c *picky) Types() []string { return []string{outbox.OrderPaid} }

// A consumer that names its types (outbox.Selective, as the receipts do)
// is handed those alone: the relay writes no inbox row, so no commit, for
// an event it would have ignored. The others are still handed every event.
func TestASelectiveConsumerIsHandedItsTypesAlone(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("picky@example.com")
	orderID := e.createOrder(token, "picky", orderBody(e.products()[0], 1))
	if r := e.do(e.payRequest(token, orderID, "picky-pay", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	c := &counting{handed: map[string]int{}, effects: map[string]int{}}
	p := &picky{ignoring{handed: map[string]int{}}}
	relay := outbox.NewRelay(e.db, []outbox.Consumer{c, p}, outbox.RelayConfig{Interval: 20 * time.Millisecond, Lease: time.Second, Holder: "test", Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	untilRelayed(t, e.db, c.Name(), 2)
	deadline := time.Now().Add(time.Minute)
	for e.count("inbox", "consumer = ?", p.Name()) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	paid := outbox.EventID(outbox.OrderPaid, "")
	var handed []string
	for id := range p.handed {
		handed = append(handed, id)
	}
	if len(handed) != 1 || !strings.HasPrefix(handed[0], paid) || e.count("inbox", "consumer = ?", p.Name()) != 1 || len(c.handed) != 2 {
		t.Fatalf("the selective consumer was handed %v (%d inbox rows), the other %d events; want the paid event alone, 1 row, and 2",
			handed, e.count("inbox", "consumer = ?", p.Name()), len(c.handed))
	}
}

// A placed order's event carries the order as it stands, built from the
// order just written rather than read back (models.orderEvent): its data is
// what GET /api/v1/orders/{id} shows of it — lines in order, no payments,
// attempts or refunds, the same time — and what the 201 answered.
func TestAPlacedOrdersEventIsTheOrderAsTheAPIShowsIt(t *testing.T) {
	e := newEnv(t)
	token, p := e.signUp("event-view@example.com"), e.products()
	created := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("event-view"), body: orderBody(p[0], 2, p[1], 1)})
	if created.Status != http.StatusCreated {
		t.Fatalf("order: %d %s", created.Status, created.Body)
	}
	id := created.json(t)["id"].(string)
	shown := e.do(request{method: "GET", path: "/api/v1/orders/" + id, token: token})
	var ev outbox.Event
	if err := e.db.Where("type = ? AND order_id = ?", outbox.OrderPlaced, id).Take(&ev).Error; err != nil {
		t.Fatal(err)
	}
	var body struct{ Data map[string]any }
	if err := json.Unmarshal([]byte(ev.Body), &body); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(body.Data)
	for name, want := range map[string][]byte{"GET": shown.Body, "the 201": created.Body} {
		var w map[string]any
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(w); string(got) != string(data) {
			t.Errorf("the event's data differs from %s:\nevent %s\n%s   %s", name, data, name, got)
		}
	}
}

// A wake follows every commit: a burst of them, one every 2 ms for half a
// second (a busy instance's commits), starts a look for events at most once
// every 50 ms, not once a wake, and the event committed during the burst is
// still handed, without waiting for the poll.
func TestABurstOfWakesStartsFewLooks(t *testing.T) {
	db := testkit.Open(t, testkit.URL(t))
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	var looks atomic.Int64
	if err := db.Callback().Row().After("gorm:row").Register("test:looks", func(tx *gorm.DB) {
		if tx.Statement.Table == "events" {
			looks.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	c := &ignoring{handed: map[string]int{}}
	relay := outbox.NewRelay(db, []outbox.Consumer{c}, outbox.RelayConfig{Interval: time.Hour, Lease: time.Minute, Holder: "burst", Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(100 * time.Millisecond) // its first look, at start
	before := looks.Load()
	if err := db.Transaction(func(tx *gorm.DB) error {
		return outbox.Record(tx, outbox.OrderPlaced, "burst-fact", "order", map[string]int{"n": 1})
	}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for range 250 {
		relay.Wake()
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the last wake's look
	// 250 wakes over about 0.5 s (longer on a loaded machine): at most one
	// look every 50 ms, each at most three queries (on SQLite the last event,
	// then the events, then none left); a look a wake would be hundreds.
	most := 3 * (int64(time.Since(began)/(50*time.Millisecond)) + 2)
	if n := looks.Load() - before; n > most || n == 0 {
		t.Fatalf("250 wakes started %d queries of the events, want %d at most (a look every 50 ms)", n, most)
	}
	cancel()
	<-done
	if c.handed[outbox.EventID(outbox.OrderPlaced, "burst-fact")] != 1 {
		t.Fatalf("the event committed during the burst was handed %v times, want once", c.handed)
	}
}

// failingOne fails one event while broken, and counts what it was handed.
type failingOne struct {
	mu     sync.Mutex
	event  string
	broken bool
	handed map[string]int
}

func (c *failingOne) Name() string { return "test-failing" }

func (c *failingOne) Handle(_ context.Context, _ *gorm.DB, ev outbox.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.ID == c.event && c.broken {
		return errors.New("refused")
	}
	c.handed[ev.ID]++
	return nil
}

func (c *failingOne) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handed[id]
}

// On SQLite, where events commit in seq order, a consumer's look starts past
// the events it has settled: the history is read at the first look, not at
// every look after it (each read it whole: half a busy shop's CPU). An event
// the consumer failed and parked before that point is still handed once
// staff retry it. PostgreSQL looks from the first event, with the same answers.
func TestALookStartsPastTheEventsItSettled(t *testing.T) {
	db := testkit.Open(t, testkit.URL(t))
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := db.Transaction(func(tx *gorm.DB) error {
			return outbox.Record(tx, outbox.OrderPlaced, fmt.Sprintf("history-%d", i), "order", map[string]int{"n": i})
		}); err != nil {
			t.Fatal(err)
		}
	}
	parked := outbox.EventID(outbox.OrderPlaced, "history-50")
	c := &failingOne{event: parked, broken: true, handed: map[string]int{}}
	var mu sync.Mutex
	var looks []string // each look's SQL, with its values
	if err := db.Callback().Row().After("gorm:row").Register("test:looks", func(tx *gorm.DB) {
		if tx.Statement.Table == "events" && strings.Contains(tx.Statement.SQL.String(), "NOT EXISTS") {
			mu.Lock()
			looks = append(looks, tx.Dialector.Explain(tx.Statement.SQL.String(), tx.Statement.Vars...))
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	relay := outbox.NewRelay(db, []outbox.Consumer{c}, outbox.RelayConfig{Interval: 20 * time.Millisecond, Lease: time.Minute,
		Holder: "mark", MaxAttempts: 1, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	until(t, "the history handed, one event parked", func() bool {
		var n int64
		db.Table("outbox_retries").Where("parked_at IS NOT NULL").Count(&n)
		return n == 1 && c.count(outbox.EventID(outbox.OrderPlaced, "history-199")) == 1
	})
	var last int64
	if err := db.Table("events").Select("MAX(seq)").Scan(&last).Error; err != nil {
		t.Fatal(err)
	}
	past := fmt.Sprintf("seq > %d", last)
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(looks)
	}
	if !database.IsPostgres(db) { // the pass that settled the history ends, and sets the mark
		until(t, "a look past the history", func() bool {
			return slices.ContainsFunc(seen(), func(look string) bool { return strings.Contains(look, past) })
		})
	}
	mu.Lock()
	looks = nil
	mu.Unlock()
	time.Sleep(100 * time.Millisecond) // a few looks, polling every 20 ms
	for _, look := range seen() {
		if database.IsPostgres(db) == strings.Contains(look, past) {
			t.Fatalf("a look after the history (PostgreSQL: %v):\n%s\nwant %q in it only on SQLite", database.IsPostgres(db), look, past)
		}
	}
	if len(seen()) == 0 {
		t.Fatal("no look in 100 ms, polling every 20 ms")
	}
	c.mu.Lock()
	c.broken = false
	c.mu.Unlock()
	if ok, err := outbox.Retry(t.Context(), db, c.Name(), parked); err != nil || !ok {
		t.Fatalf("retry: %v, %v", ok, err)
	}
	until(t, "the parked event, retried, handed", func() bool {
		var n int64
		db.Table("outbox_retries").Count(&n)
		return c.count(parked) == 1 && n == 0
	})
	for i := range 200 {
		if id := outbox.EventID(outbox.OrderPlaced, fmt.Sprintf("history-%d", i)); c.count(id) != 1 {
			t.Fatalf("%s handed %d times, want once", id, c.count(id))
		}
	}
}
