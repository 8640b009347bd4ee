package tests

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/outbox/publish"
)

// A running shop whose relay polls only every 30 s publishes an order's
// event within seconds of its commit: the server wakes the relay when it
// commits, so the relay does not wait for its poll. The second order is
// placed once the first's event is out, so that no pass at the relay's
// start can have taken it.
func TestACommittedOrdersEventLeavesWithoutWaitingForThePoll(t *testing.T) {
	t.Parallel()
	binary, err := testkit.Build(t.TempDir(), raceEnabled)
	if err != nil {
		t.Fatal(err)
	}
	s := newJetStream(t)
	databaseURL := testkit.URL(t)
	shop := startProcess(t, binary, append(s.settings(), "DATABASE_URL="+databaseURL, "OUTBOX_POLL_INTERVAL=30s", "OUTBOX_LEASE=1m")...)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: shop.URL}
	token := e.signUp("woken@example.com")
	for i, key := range []string{"woken-1", "woken-2"} {
		committed := time.Now()
		e.createOrder(token, key, orderBody(e.products()[0], 1))
		for len(s.messages()) < i+1 {
			if time.Since(committed) > 10*time.Second {
				t.Fatalf("order %d's event not in the stream %s after its commit; the poll is every 30 s", i+1, time.Since(committed))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	untilRelayed(t, e.db, publish.JetStreamConsumer, 2)
	s.onceEach(eventsOf(t, e.db))
}

// Staff redeliver a webhook while a sender is posting it: the post in
// flight is recorded as an attempt, and cannot mark the delivery done over
// the redelivery, which is posted once more.
func TestARedeliveryWhileASenderPostsIsNotLost(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("inflight@example.com")
	e.createOrder(token, "inflight", orderBody(e.products()[0], 1))
	events := e.factEvents()
	e.handleAll(notify.Webhooks{}, events, 1)
	entered, release := make(chan struct{}), make(chan struct{})
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) == 1 {
			close(entered)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	sender := e.sender(srv.URL, 8)
	sender.Timeout = 10 * time.Second
	e.clock.Advance(time.Minute)
	first := make(chan error, 1)
	go func() { _, err := sender.SendDue(t.Context()); first <- err }()
	<-entered
	if _, err := notify.Redeliver(t.Context(), e.db, events[0].ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := e.rounds(sender, 5); n != 1 {
		t.Fatalf("%d attempts after the redelivery; want the one it asked for", n)
	}
	var d models.WebhookDelivery
	if err := e.db.Take(&d, "id = ?", events[0].ID).Error; err != nil {
		t.Fatal(err)
	}
	if posts.Load() != 2 || d.State != models.DeliveryDelivered || d.Attempts != 2 || e.count("webhook_attempts", "delivery_id = ?", d.ID) != 2 {
		t.Fatalf("%d posts; delivery %s after %d attempts (%d recorded); want 2 posts, delivered, 2 attempts", posts.Load(), d.State, d.Attempts, e.count("webhook_attempts", "delivery_id = ?", d.ID))
	}
	if events[0].Type != outbox.OrderPlaced {
		t.Fatalf("the delivery is of %s; want the order's placing", events[0].Type)
	}
}
