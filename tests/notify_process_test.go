package tests

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// kill -9 between a receipt's send and its record (the test build's hook,
// -tags notifycrash): the SMTP server has the email, the shop has no
// record of it. The restarted shop's relay hands the event to the receipts
// again, which send it again — with the same Message-ID, so the duplicate
// is detectable — and record it; a third start sends nothing more.
func TestAReceiptResentAfterAKillIsTheSameMessage(t *testing.T) {
	binary, err := testkit.Build(t.TempDir(), raceEnabled, "notifycrash")
	if err != nil {
		t.Fatal(err)
	}
	box := newMailbox(t)
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "SMTP_URL=" + box.URL, "PUBLIC_URL=http://shop.example",
		"OUTBOX_POLL_INTERVAL=100ms", "OUTBOX_LEASE=1s", "PAYMENT_RECONCILE_EVERY=0"}
	start := func(extra ...string) *testkit.Process {
		p, err := testkit.Start(binary, t.TempDir(), append(settings, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		return p
	}
	first := start("NOTIFY_CRASH_AFTER_SEND=1")
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: first.URL}
	e.paidOrder("crash-receipt@example.com", payments.MethodVisa)
	until(t, "the receipt to be sent", func() bool { n, _ := box.received(); return len(n) == 1 })
	first.Kill()
	if n := e.count("receipts"); n != 0 {
		t.Fatalf("%d receipts recorded: the kill did not land between the send and the record", n)
	}
	start()
	until(t, "the receipt to be recorded", func() bool { return e.count("receipts") == 1 })
	messages, ids := box.received()
	events := e.receiptEvents()
	want := "<" + notify.MessageID(events[0].ID, "shop.example") + ">"
	if len(events) != 1 || len(messages) != 2 || ids[0] != want || ids[1] != want {
		t.Fatalf("%d events, Message-IDs %v; want the one event's email twice, both %s", len(events), ids, want)
	}
	third := start()
	e.url = third.URL
	e.paidOrder("after-restart@example.com", payments.MethodVisa)
	until(t, "the next receipt", func() bool { return e.count("receipts") == 2 })
	if messages, _ := box.received(); len(messages) != 3 {
		t.Fatalf("%d emails; want the resent one, and one for the next order", len(messages))
	}
}

// A running shop with WEBHOOK_URL: orders placed and paid through retries
// and double-clicks, with the relay and the sender in the process; the
// merchant's endpoint verifies every signature, refuses each first attempt
// and then accepts each webhook-id once. Deliveries = events = facts.
func TestARunningShopDeliversEveryEventAsAWebhook(t *testing.T) {
	recv, srv := newReceiver(t)
	recv.flaky = true
	databaseURL := testkit.URL(t)
	shop := startShop(t, "shop with webhooks", "DATABASE_URL="+databaseURL, "WEBHOOK_URL="+srv.URL, "WEBHOOK_SECRET="+vectorSecret,
		"WEBHOOK_BACKOFF=50ms", "OUTBOX_POLL_INTERVAL=100ms", "PAYMENT_RECONCILE_EVERY=0")
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: shop.url}
	token := e.signUp("webhooks@example.com")
	product := e.productPriced(1900)
	for i := range 3 {
		orderID := e.createOrder(token, fmt.Sprintf("order-%d", i), orderBody(product, 1))
		pay := e.payRequest(token, orderID, fmt.Sprintf("pay-%d", i), payments.MethodVisa)
		for _, r := range append(e.concurrently([]request{pay, pay}), e.do(pay)) {
			if r.Status != http.StatusCreated {
				t.Fatalf("pay: %d %s", r.Status, r.Body)
			}
		}
	}
	until(t, "every delivery to be delivered", func() bool {
		return e.count("webhook_deliveries", "state = ?", "delivered") == 6
	})
	events := e.factEvents()
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(events) != 6 || e.count("webhook_deliveries") != 6 || recv.bad != 0 || len(recv.sent) != 6 {
		t.Fatalf("%d events, %d deliveries, %d webhook-ids sent, %d bad signatures; want 6 (3 placed, 3 paid) and none bad",
			len(events), e.count("webhook_deliveries"), len(recv.sent), recv.bad)
	}
	for _, ev := range events {
		if recv.sent[ev.ID] != 2 || recv.accepted[ev.ID] != 1 {
			t.Errorf("%s: sent %d times, accepted %d; want refused once, then accepted", ev.ID, recv.sent[ev.ID], recv.accepted[ev.ID])
		}
	}
	if n := e.count("events", "type = ?", outbox.OrderPaid); n != 3 {
		t.Errorf("%d order.paid events for 3 orders paid", n)
	}
}
