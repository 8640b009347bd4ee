package tests

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
)

// runRelay relays the database's events to the consumers, retrying a
// failed event after 20 ms doubling to 100 ms, parking it after
// maxAttempts, until the test ends or the returned stop is called.
func (e *env) runRelay(maxAttempts int, consumers ...outbox.Consumer) (stop func()) {
	relay := outbox.NewRelay(e.db, consumers, outbox.RelayConfig{Interval: 20 * time.Millisecond, Lease: time.Minute, Holder: "test",
		MaxAttempts: maxAttempts, Backoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(e.t.Context())
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return stop
}

// receivedBy reports whether the mailbox holds a message to the address.
func (b *mailbox) receivedBy(to string) int {
	messages, _ := b.received()
	n := 0
	for _, m := range messages {
		if strings.Contains(m.Header.Get("To"), to) {
			n++
		}
	}
	return n
}

// A real SMTP server answers 450 ("for now") for one shopper's address:
// the receipts of the shoppers paid after it arrive meanwhile, and the
// refused one arrives once the 450 stops, each once. Then one that keeps
// failing is parked after its attempts, with its last error, handed no
// more, shown to staff in the API and the console, and sent once when they
// retry it with a key, twice.
func TestAReceiptRefusedForNowHoldsUpNoOtherAndIsParkedAfterItsAttempts(t *testing.T) {
	e := newEnv(t)
	box := newMailbox(t, map[string]int{"later@example.com": 450, "never@example.com": 450})
	mailer, err := notify.NewMailer(box.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	receipts := notify.Receipts{Logger: slog.New(slog.DiscardHandler), Mailer: mailer, From: "shop@example.com", Domain: "shop.example", PublicURL: "http://shop.example"}
	stop := e.runRelay(1000, receipts)
	for _, email := range []string{"later@example.com", "first@example.com", "second@example.com"} {
		e.shopperOrder(email)
	}
	until(t, "the receipts after the refused one", func() bool {
		return box.receivedBy("first@example.com") == 1 && box.receivedBy("second@example.com") == 1
	})
	if box.receivedBy("later@example.com") != 0 || e.count("outbox_retries", "consumer = ? AND attempts > 0 AND last_error LIKE ?", "receipts", "%450%") != 1 {
		t.Fatalf("the refused receipt: %d sent, %d scheduled again with its 450; want 0 and 1", box.receivedBy("later@example.com"),
			e.count("outbox_retries", "last_error LIKE ?", "%450%"))
	}
	box.refusing("later@example.com", 0)
	// Its schedule goes just after its receipt is recorded: wait for both.
	until(t, "the refused receipt, once the 450 stops", func() bool { return e.count("receipts") == 3 && e.count("outbox_retries") == 0 })
	stop()
	if box.receivedBy("later@example.com") != 1 || e.count("outbox_retries") != 0 {
		t.Fatalf("%d receipts to later@, %d events scheduled again; want 1 and none", box.receivedBy("later@example.com"), e.count("outbox_retries"))
	}

	e.runRelay(3, receipts)
	e.shopperOrder("never@example.com")
	until(t, "the failing receipt to be parked", func() bool { return e.count("outbox_retries", "parked_at IS NOT NULL") == 1 })
	parked, err := outbox.ParkedEvents(t.Context(), e.db, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 1 || parked[0].Attempts != 3 || parked[0].Consumer != "receipts" || !strings.Contains(parked[0].LastError, "450") {
		t.Fatalf("parked %+v; want the receipt to never@, after 3 attempts, with its 450", parked)
	}
	if box.receivedBy("never@example.com") != 0 || e.count("receipts") != 3 {
		t.Fatalf("the parked receipt was sent")
	}
	staff, _ := e.staffToken("staff@example.com")
	listed := e.do(request{method: "GET", path: "/api/v1/staff/parked-events", token: staff}).json(t)["parked_events"].([]any)
	if len(listed) != 1 || listed[0].(map[string]any)["event_id"] != parked[0].EventID || !strings.Contains(listed[0].(map[string]any)["last_error"].(string), "450") {
		t.Fatalf("staff's list of parked events: %v", listed)
	}
	page := e.staffBrowser("console@example.com").get("/staff/parked")
	if page.Status != http.StatusOK || !strings.Contains(string(page.Body), "/staff/parked/receipts/"+parked[0].EventID+"/retry") || !strings.Contains(string(page.Body), "450") {
		t.Fatalf("the console's parked page: %d, without the event's Retry button and its 450:\n%s", page.Status, page.Body)
	}
	box.refusing("never@example.com", 0)
	retry := request{method: "POST", path: "/api/v1/staff/parked-events/receipts/" + parked[0].EventID + "/retry", token: staff, key: key("retry-never")}
	for i := range 2 {
		if r := e.do(retry); r.Status != http.StatusAccepted || r.replayed() != (i == 1) {
			t.Fatalf("retry %d: %d %s", i, r.Status, r.Body)
		}
	}
	until(t, "the retried receipt", func() bool { return e.count("receipts") == 4 && e.count("outbox_retries") == 0 })
	if box.receivedBy("never@example.com") != 1 || e.count("outbox_retries") != 0 {
		t.Fatalf("%d receipts to never@ after the retry, %d events scheduled; want 1 and none", box.receivedBy("never@example.com"), e.count("outbox_retries"))
	}
}

// Staff ask for a webhook delivered already to be sent again: the
// request, retried with its key, makes one redelivery; the endpoint is
// sent the same webhook-id and body a second time, and the delivery lists
// two attempts. A shopper's request is refused (403) and sends nothing.
func TestAWebhookRedeliveredByStaffIsSentOnceMoreWithTheSameIDAndBody(t *testing.T) {
	e := newEnv(t)
	e.shopperOrder("redeliver@example.com")
	events := e.factEvents()
	e.handleAll(notify.Webhooks{}, events, 1)
	recv, srv := newReceiver(t)
	sender := e.sender(srv.URL, 8)
	e.rounds(sender, 5)
	id := events[0].ID
	staff, _ := e.staffToken("staff@example.com")
	shopper := e.signUp("shopper@example.com")
	path := "/api/v1/webhook-deliveries/" + id + "/redeliver"
	isProblem(t, e.do(request{method: "POST", path: path, token: shopper, key: key("redeliver-shopper")}), http.StatusForbidden, "/problems/forbidden")
	redeliver := request{method: "POST", path: path, token: staff, key: key("redeliver-1")}
	for i := range 2 {
		if r := e.do(redeliver); r.Status != http.StatusAccepted || r.replayed() != (i == 1) {
			t.Fatalf("redeliver %d: %d %s (replayed %v)", i, r.Status, r.Body, r.replayed())
		}
	}
	if n := e.rounds(sender, 5); n != 1 {
		t.Fatalf("%d attempts after the redelivery; want 1", n)
	}
	if recv.sent[id] != 2 || recv.accepted[id] != 2 || recv.bodies[id][0] != recv.bodies[id][1] || recv.bad != 0 || len(recv.sent) != len(events) {
		t.Fatalf("%s sent %d times, accepted %d, bodies alike %v; want twice the same", id, recv.sent[id], recv.accepted[id], recv.bodies[id][0] == recv.bodies[id][len(recv.bodies[id])-1])
	}
	if n := e.count("webhook_attempts", "delivery_id = ?", id); n != 2 || e.count("webhook_deliveries", "state = ?", "delivered") != int64(len(events)) {
		t.Fatalf("%d attempts recorded for the redelivered one; want 2, and every delivery delivered", n)
	}
}

// shortBatcher answers its first batch with one answer too few, and every
// later batch in full; it counts how often it is handed each event.
type shortBatcher struct {
	mu     sync.Mutex
	calls  int
	handed map[string]int
}

func (b *shortBatcher) Name() string { return "test-short" }

func (b *shortBatcher) Handle(context.Context, *gorm.DB, outbox.Event) error {
	return errors.New("a Batcher is handed its events in batches")
}

func (b *shortBatcher) HandleBatch(_ context.Context, _ *gorm.DB, events []outbox.Event) []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	for _, ev := range events {
		b.handed[ev.ID]++
	}
	if b.calls == 1 {
		return make([]error, len(events)-1)
	}
	return make([]error, len(events))
}

// A batch consumer that answers for fewer events than it was handed is
// trusted for none of them: the whole batch is handed again after its
// backoff, and no event is skipped (on SQLite the relay's next look starts
// past the batch's last event).
func TestABatchAnsweredShortIsHandedAgainWhole(t *testing.T) {
	e := newEnv(t)
	for _, email := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		e.shopperOrder(email)
	}
	events := eventsOf(t, e.db)
	b := &shortBatcher{handed: map[string]int{}}
	e.runRelay(1000, b)
	untilRelayed(t, e.db, b.Name(), int64(len(events)))
	until(t, "the short batch's retries to be forgotten", func() bool { return e.count("outbox_retries") == 0 })
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ev := range events {
		if b.handed[ev.ID] != 2 {
			t.Errorf("event %d (%s) handed %d times; want twice: the short batch, then again", ev.Seq, ev.Type, b.handed[ev.ID])
		}
	}
}

// refusing fails every event handed to it until told to take them.
type refusing struct {
	mu     sync.Mutex
	take   bool
	handed map[string]int
}

func (c *refusing) Name() string { return "test-refusing" }

func (c *refusing) Handle(_ context.Context, _ *gorm.DB, ev outbox.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handed[ev.ID]++
	if !c.take {
		return errors.New("not now")
	}
	return nil
}

// An event parked, then taken out of its consumer's retries with no look
// to see it (the release before this one retried a parked event so, in a
// rolling upgrade), is handed again at the next look from the first event:
// on SQLite a look starts past the events settled, and would never see it.
func TestAnEventRetriedByTheReleaseBeforeIsHandedAgain(t *testing.T) {
	e := newEnv(t)
	e.shopperOrder("parked@example.com")
	c := &refusing{handed: map[string]int{}}
	relay := outbox.NewRelay(e.db, []outbox.Consumer{c}, outbox.RelayConfig{Interval: 20 * time.Millisecond, Lease: time.Minute, Holder: "test",
		MaxAttempts: 1, Recheck: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	events := eventsOf(t, e.db)
	until(t, "every event parked", func() bool { return e.count("outbox_retries", "parked_at IS NOT NULL") == int64(len(events)) })
	e.shopperOrder("later@example.com") // a look now starts past the parked ones
	until(t, "the later events parked", func() bool {
		return e.count("outbox_retries", "parked_at IS NOT NULL") == int64(len(eventsOf(t, e.db)))
	})
	c.mu.Lock()
	c.take = true
	c.mu.Unlock()
	must(t, e.db.Exec("DELETE FROM outbox_retries WHERE event_id = ?", events[0].ID).Error) // the release before's Retry
	until(t, "the event retried by the release before", func() bool { return e.count("inbox", "consumer = ? AND event_id = ?", c.Name(), events[0].ID) == 1 })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handed[events[0].ID] != 2 {
		t.Fatalf("the event retried by the release before was handed %d times; want twice", c.handed[events[0].ID])
	}
}
