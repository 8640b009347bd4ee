package tests

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

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
// failing is parked after its attempts, with its last error, and handed
// no more.
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
	until(t, "the refused receipt, once the 450 stops", func() bool { return e.count("receipts") == 3 })
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
}
