package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/outbox/publish"
	"github.com/shop/shop/payments"
)

// natsURL is the NATS server with JetStream the messages tests publish to.
const natsURL = "nats://127.0.0.1:4222"

// jetStream is a test's own stream and subject prefix on the local NATS
// server (deleted when the test ends), so that tests run in parallel.
type jetStream struct {
	t              *testing.T
	js             jetstream.JetStream
	stream, prefix string
}

func newJetStream(t *testing.T) *jetStream {
	t.Helper()
	conn, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("NATS at %s: %v", natsURL, err)
	}
	t.Cleanup(conn.Close)
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 5)
	_, _ = rand.Read(suffix)
	id := hex.EncodeToString(suffix)
	s := &jetStream{t: t, js: js, stream: "TEST_" + strings.ToUpper(id), prefix: "test" + id + ".shop"}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), s.stream) })
	return s
}

// settings are the shop's settings to publish to this stream.
func (s *jetStream) settings() []string {
	return []string{"NATS_URL=" + natsURL, "NATS_STREAM=" + s.stream, "NATS_SUBJECT_PREFIX=" + s.prefix,
		"OUTBOX_POLL_INTERVAL=50ms", "OUTBOX_LEASE=1s"}
}

// published is one message of the stream: its subject and Nats-Msg-Id.
type published struct{ subject, msgID, eventType string }

// messages reads every message of the stream (none if the shop has not
// created it yet).
func (s *jetStream) messages() []published {
	s.t.Helper()
	ctx := context.Background()
	stream, err := s.js.Stream(ctx, s.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	var out []published
	for seq := uint64(1); seq <= stream.CachedInfo().State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			s.t.Fatalf("message %d: %v", seq, err)
		}
		var body struct {
			SpecVersion, ID, Type string
		}
		if err := json.Unmarshal(m.Data, &body); err != nil || body.SpecVersion != "1.0" || body.ID != m.Header.Get("Nats-Msg-Id") {
			s.t.Fatalf("message %d is no CloudEvent of its Nats-Msg-Id %q (%v): %s", seq, m.Header.Get("Nats-Msg-Id"), err, m.Data)
		}
		out = append(out, published{subject: m.Subject, msgID: m.Header.Get("Nats-Msg-Id"), eventType: body.Type})
	}
	return out
}

// onceEach checks that the stream holds each of the events once, on its
// subject, and nothing else.
func (s *jetStream) onceEach(events []outbox.Event) {
	s.t.Helper()
	msgs := s.messages()
	byID := map[string]published{}
	for _, m := range msgs {
		if _, twice := byID[m.msgID]; twice {
			s.t.Errorf("Nats-Msg-Id %s is in the stream twice", m.msgID)
		}
		byID[m.msgID] = m
	}
	for _, ev := range events {
		m, ok := byID[ev.ID]
		if !ok || m.subject != s.prefix+"."+ev.Type || m.eventType != ev.Type {
			s.t.Errorf("event %s: in the stream as %+v (found %v); want once on %s.%s", ev.ID, m, ok, s.prefix, ev.Type)
		}
	}
	if len(msgs) != len(events) {
		s.t.Errorf("%d messages in the stream for %d events", len(msgs), len(events))
	}
}

// eventsOf are the events of the database, in seq order.
func eventsOf(t *testing.T, db *gorm.DB) []outbox.Event {
	t.Helper()
	var events []outbox.Event
	if err := db.Order("seq").Find(&events).Error; err != nil {
		t.Fatal(err)
	}
	return events
}

// untilRelayed waits, for at most a minute, until the consumer has every
// event of the database in its inbox, want of them.
func untilRelayed(t *testing.T, db *gorm.DB, consumer string, want int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var events, done int64
		db.Model(&outbox.Event{}).Count(&events)
		db.Table("inbox").Where("consumer = ?", consumer).Count(&done)
		if events == want && done == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d of %d events in its inbox; want %d", consumer, done, events, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// N orders placed and paid, each request sent to two instances at once
// (a double-click that lands on both) and then retried, with both
// instances relaying: the stream holds N order.placed and N order.paid
// messages, no two sharing a Nats-Msg-Id, and the events table one event
// per fact.
func TestMessagesOncePerFactAcrossRetriesDoubleClicksAndTwoInstances(t *testing.T) {
	t.Parallel()
	s := newJetStream(t)
	databaseURL := testkit.URL(t)
	settings := append(s.settings(), "DATABASE_URL="+databaseURL)
	a, b := startShop(t, "instance a", settings...), startShop(t, "instance b", settings...)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: a.url}
	token := e.signUp("messages-once@example.com")
	product := e.products()[0]
	const n = 6
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := range n {
		order := request{method: "POST", path: "/api/v1/orders", token: token, key: key(fmt.Sprintf("msg-order-%d", i)), body: orderBody(product, 1)}
		id := bothThenRetry(t, ctx, a.url, b.url, order, http.StatusCreated)
		pay := request{method: "POST", path: "/api/v1/orders/" + id + "/payments", token: token, key: key(fmt.Sprintf("msg-pay-%d", i)), body: payBody(payments.MethodVisa)}
		bothThenRetry(t, ctx, a.url, b.url, pay, http.StatusCreated)
	}
	untilRelayed(t, e.db, publish.JetStreamConsumer, 2*n)
	if orders, paid := e.count("orders"), e.count("payments", "status = ?", "succeeded"); orders != n || paid != n {
		t.Fatalf("%d orders and %d payments; want %d of each", orders, paid, n)
	}
	if placed, paid := e.count("events", "type = ?", outbox.OrderPlaced), e.count("events", "type = ?", outbox.OrderPaid); placed != n || paid != n {
		t.Fatalf("%d order.placed and %d order.paid events; want %d of each, one per fact", placed, paid, n)
	}
	s.onceEach(eventsOf(t, e.db))
}

// bothThenRetry sends r to both instances at once, then again to the
// first, each until a final answer, and checks that all three are the
// same want; it returns the resource's id.
func bothThenRetry(t *testing.T, ctx context.Context, a, b string, r request, want int) string {
	t.Helper()
	answers := make([]response, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, base := range []string{a, b} {
		wg.Go(func() { <-start; answers[i], errs[i] = untilFinal(ctx, func() string { return base }, r) })
	}
	close(start)
	wg.Wait()
	answers[2], errs[2] = untilFinal(ctx, func() string { return a }, r)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	id := ""
	for i, answer := range answers {
		got, err := answer.field("id")
		if answer.Status != want || err != nil || (id != "" && got != id) {
			t.Fatalf("%s %s, answer %d: %d %s; want %d, the same resource each time", r.method, r.path, i, answer.Status, answer.Body, want)
		}
		id = got
	}
	return id
}

// A stream that exists but does not take the prefix's subjects is refused
// at start, naming both, rather than failing every publish behind the
// first; one that does (made by the shop, or by hand with prefix.>) is used.
func TestAStreamOfAnotherPrefixIsRefusedAtStart(t *testing.T) {
	s := newJetStream(t)
	ctx := t.Context()
	if _, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: s.stream, Subjects: []string{s.prefix + "-other.>"}}); err != nil {
		t.Fatal(err)
	}
	if js, err := publish.NewJetStream(ctx, natsURL, s.stream, s.prefix); err == nil || !strings.Contains(err.Error(), s.prefix+".>") {
		if js != nil {
			js.Close()
		}
		t.Fatalf("a stream of another prefix: %v; want an error naming %s.>", err, s.prefix)
	}
	if _, err := s.js.UpdateStream(ctx, jetstream.StreamConfig{Name: s.stream, Subjects: []string{s.prefix + ".>"}}); err != nil {
		t.Fatal(err)
	}
	js, err := publish.NewJetStream(ctx, natsURL, s.stream, s.prefix)
	if err != nil {
		t.Fatalf("the stream of the prefix: %v", err)
	}
	js.Close()
}
