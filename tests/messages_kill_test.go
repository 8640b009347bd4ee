package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/outbox/publish"
)

// A shop killed -9 by the relay's side of a batch of events, and another
// started on the same database: between the commit and the publish, no
// event of the batch is in the stream and the second shop publishes them;
// between the stream's acks and the inbox's mark, the second shop
// publishes them again, and the stream's duplicate window drops them (same
// Nats-Msg-Id). Either way the stream holds each event once, and the inbox
// has it. The batch is made by orders placed through a shop without NATS,
// so that the paused shop's first pass reads them all at once. The pause
// points exist only in a test build (-tags outboxpause).
func TestKill9AroundThePublishPublishesEachEventOnce(t *testing.T) {
	t.Parallel()
	binary, err := testkit.Build(t.TempDir(), raceEnabled, "outboxpause")
	if err != nil {
		t.Fatal(err)
	}
	const orders = 3 // one batch
	for _, c := range []struct {
		point    string
		inStream int // messages in the stream when the first shop dies
	}{
		{"before-publish", 0},
		{"after-publish", orders},
	} {
		t.Run(c.point, func(t *testing.T) {
			s := newJetStream(t)
			databaseURL := testkit.URL(t)
			settings := append(s.settings(), "DATABASE_URL="+databaseURL)
			unpublished := startProcess(t, binary, "DATABASE_URL="+databaseURL)
			e := &env{t: t, db: testkit.Open(t, databaseURL), url: unpublished.URL}
			token := e.signUp("kill9-" + c.point + "@example.com")
			var ids []string
			for i := range orders {
				ids = append(ids, e.createOrder(token, fmt.Sprintf("kill9-order-%d", i), orderBody(e.products()[0], 1)))
			}
			unpublished.Kill()
			first := startProcess(t, binary, append(settings, "OUTBOX_PAUSE="+c.point)...)
			untilLogged(t, first, "outbox paused at "+c.point+" of "+outbox.OrderPlaced+":"+ids[0])
			first.Kill()
			if got := len(s.messages()); got != c.inStream {
				t.Fatalf("%d messages in the stream when the first shop died at %s; want %d", got, c.point, c.inStream)
			}
			if done := e.count("inbox", "consumer = ?", publish.JetStreamConsumer); done != 0 {
				t.Fatalf("%d events marked published by a shop killed before its mark", done)
			}
			e.url = startProcess(t, binary, settings...).URL
			untilRelayed(t, e.db, publish.JetStreamConsumer, orders)
			events := eventsOf(t, e.db)
			if len(events) != orders {
				t.Fatalf("events %+v; want one per order", events)
			}
			for i, ev := range events {
				if ev.ID != outbox.OrderPlaced+":"+ids[i] {
					t.Fatalf("event %d is %s; want the order.placed of %s", i, ev.ID, ids[i])
				}
			}
			s.onceEach(events)
			if r := e.do(request{method: "GET", path: "/api/v1/orders/" + ids[0], token: token}); r.Status != http.StatusOK {
				t.Fatalf("the order after the restart: %d %s", r.Status, r.Body)
			}
		})
	}
}

// startProcess starts binary as a shop of the test's own, killed when the
// test ends.
func startProcess(t *testing.T, binary string, env ...string) *testkit.Process {
	t.Helper()
	p, err := testkit.Start(binary, t.TempDir(), env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("output:\n%s", p.Output())
		}
	})
	return p
}

// untilLogged waits, for at most a minute, until the process has logged line.
func untilLogged(t *testing.T, p *testkit.Process, line string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.Output(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("the shop did not log %q:\n%s", line, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
