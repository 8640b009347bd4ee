package tests

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/outbox"
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
	_, err := outbox.Once(ctx, db, c.Name(), ev.ID, func(*gorm.DB) error {
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
