package tests

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/payments"
)

// mailbox is an SMTP server on 127.0.0.1 that keeps every message it is
// given, whole.
type mailbox struct {
	URL      string
	refuse   map[string]int // recipients refused, with the reply code (changed through refusing)
	mu       sync.Mutex
	refused  int
	messages []*mail.Message
	raw      []string
}

func newMailbox(t *testing.T, refuse ...map[string]int) *mailbox {
	t.Helper()
	box := &mailbox{}
	if len(refuse) > 0 {
		box.refuse = refuse[0]
	}
	srv := smtp.NewServer(box)
	srv.Domain = "127.0.0.1"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	box.URL = "smtp://" + ln.Addr().String()
	return box
}

func (b *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &mailSession{box: b}, nil }

// received is every message so far, and its Message-ID headers.
func (b *mailbox) received() ([]*mail.Message, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.messages))
	for _, m := range b.messages {
		ids = append(ids, m.Header.Get("Message-ID"))
	}
	return append([]*mail.Message(nil), b.messages...), ids
}

type mailSession struct{ box *mailbox }

func (s *mailSession) Reset()                               {}
func (s *mailSession) Logout() error                        { return nil }
func (s *mailSession) Mail(string, *smtp.MailOptions) error { return nil }

// refusing makes the server answer code (0: accept) for the recipient.
func (b *mailbox) refusing(to string, code int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refuse[to] = code
}

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	code := s.box.refuse[to]
	if code == 0 {
		return nil
	}
	s.box.refused++
	return &smtp.SMTPError{Code: code, Message: "no thanks"}
}
func (s *mailSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	s.box.messages = append(s.box.messages, msg)
	s.box.raw = append(s.box.raw, string(raw))
	return nil
}

// receiptEvents are the events the fact paths wrote that a receipt is
// owed for: order.paid and order.refunded.
func (e *env) receiptEvents() []outbox.Event {
	e.t.Helper()
	var events []outbox.Event
	if err := e.db.Where("type IN ?", []string{outbox.OrderPaid, outbox.OrderRefunded}).Order("seq").Find(&events).Error; err != nil {
		e.t.Fatal(err)
	}
	return events
}

// handleAll hands every event to the consumer times times over, as a
// relay redelivers (one handler of a consumer at a time, as it runs them).
func (e *env) handleAll(c outbox.Consumer, events []outbox.Event, times int) {
	e.t.Helper()
	for range times {
		for _, ev := range events {
			if err := c.Handle(e.t.Context(), e.db, ev); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// paidThroughRetries places and pays n orders, each payment sent three
// times with its key (a retry, and a double-click racing it), and refunds
// the first one in part: n paid orders, one succeeded refund.
func (e *env) paidThroughRetries(n int) (orderIDs []string) {
	e.t.Helper()
	token := e.signUp("receipts@example.com")
	e.makeStaff("receipts@example.com")
	product := e.productPriced(1900)
	for i := range n {
		orderID := e.createOrder(token, fmt.Sprintf("order-%d", i), orderBody(product, 2))
		pay := e.payRequest(token, orderID, fmt.Sprintf("pay-%d", i), payments.MethodVisa)
		for _, r := range append(e.concurrently([]request{pay, pay}), e.do(pay)) {
			if r.Status != http.StatusCreated {
				e.t.Fatalf("pay: %d %s", r.Status, r.Body)
			}
		}
		orderIDs = append(orderIDs, orderID)
	}
	refund := e.refundRequest(token, orderIDs[0], "refund-0", `{"amount_cents":500}`)
	for range 2 {
		if r := e.do(refund); r.Status != http.StatusCreated {
			e.t.Fatalf("refund: %d %s", r.Status, r.Body)
		}
	}
	return orderIDs
}

// Each paid order and each succeeded refund is one email to its shopper,
// through payments retried and double-clicked and events handed to the
// consumer three times over: the SMTP server receives exactly one
// message per fact, whose Message-ID is derived from the event's id, with
// a text and an HTML part naming the order and the amount; the receipts
// table holds one row per message.
func TestOneReceiptPerPaidOrderAndRefund(t *testing.T) {
	e := newEnv(t)
	box := newMailbox(t)
	e.paidThroughRetries(3)
	events := e.receiptEvents()
	if len(events) != 4 {
		t.Fatalf("%d events owe a receipt; want 3 payments and 1 refund", len(events))
	}
	mailer, err := notify.NewMailer(box.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	receipts := notify.Receipts{Mailer: mailer, From: "shop@example.com", Domain: "shop.example", PublicURL: "http://shop.example"}
	e.handleAll(receipts, events, 3)
	e.handleAll(receipts, events, 1)
	messages, ids := box.received()
	if len(messages) != len(events) || e.count("receipts") != int64(len(events)) {
		t.Fatalf("%d emails, %d receipts rows; want one of each per event (%d)", len(messages), e.count("receipts"), len(events))
	}
	for _, ev := range events {
		want := "<" + notify.MessageID(ev.ID, "shop.example") + ">"
		if n := strings.Count(strings.Join(ids, " "), want); n != 1 {
			t.Errorf("%d emails with Message-ID %s; want 1 (got %v)", n, want, ids)
		}
	}
	for i, m := range messages {
		raw := box.raw[i]
		if to := m.Header.Get("To"); !strings.Contains(to, "receipts@example.com") {
			t.Errorf("an email to %q; want the shopper", to)
		}
		for _, want := range []string{"text/plain", "text/html", "Order #", "$"} {
			if !strings.Contains(raw, want) {
				t.Errorf("email %s lacks %q:\n%s", m.Header.Get("Message-ID"), want, raw)
			}
		}
	}
	if raw := strings.Join(box.raw, "\n"); !strings.Contains(raw, "$38.00") || !strings.Contains(raw, "$5.00") {
		t.Errorf("the emails do not say the amounts charged ($38.00) and refunded ($5.00)")
	}
}

// With no SMTP_URL, each receipt is an .eml file in the mail directory:
// one per event, however often it is handled, named by its Message-ID.
func TestReceiptsWithoutSMTPAreEmlFiles(t *testing.T) {
	e := newEnv(t)
	e.paidThroughRetries(2)
	events := e.receiptEvents()
	dir := t.TempDir()
	mailer, err := notify.NewMailer("", dir)
	if err != nil {
		t.Fatal(err)
	}
	e.handleAll(notify.Receipts{Mailer: mailer, From: "shop@example.com", Domain: "shop.example"}, events, 2)
	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	if err != nil || len(files) != len(events) || len(events) != 3 {
		t.Fatalf("%d .eml files for %d events (want 3): %v", len(files), len(events), err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil || !strings.HasPrefix(msg.Header.Get("Message-ID"), "<order.") || !bytes.Contains(raw, []byte("text/html")) {
			t.Errorf("%s is not a receipt (%v):\n%s", f, err, raw)
		}
	}
}

// A receipt the mail server refuses for good (550: no such mailbox) is
// logged and reported done, so the relay marks it and it holds up no later
// receipt; one it refuses for now (451) is an error, so the relay hands it
// again (here, the test hands each event twice).
func TestAReceiptRefusedForGoodHoldsUpNoOther(t *testing.T) {
	e := newEnv(t)
	box := newMailbox(t, map[string]int{"gone@example.com": 550, "later@example.com": 451})
	product := e.productPriced(1900)
	for i, email := range []string{"gone@example.com", "later@example.com", "fine@example.com"} {
		token := e.signUp(email)
		orderID := e.createOrder(token, fmt.Sprintf("order-%d", i), orderBody(product, 1))
		if r := e.do(e.payRequest(token, orderID, fmt.Sprintf("pay-%d", i), payments.MethodVisa)); r.Status != http.StatusCreated {
			t.Fatalf("pay: %d %s", r.Status, r.Body)
		}
	}
	events := e.receiptEvents()
	mailer, err := notify.NewMailer(box.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	receipts := notify.Receipts{Mailer: mailer, From: "shop@example.com", Domain: "shop.example", PublicURL: "http://shop.example"}
	var failed int
	for range 2 {
		for _, ev := range events {
			if err := receipts.Handle(t.Context(), e.db, ev); err != nil {
				failed++
			}
		}
	}
	messages, _ := box.received()
	if len(events) != 3 || len(messages) != 1 || e.count("receipts") != 1 || failed != 2 || box.refused != 4 {
		t.Fatalf("%d events, %d emails, %d receipts rows, %d failed handlings, %d refusals; want 3, 1 (fine@), 1, 2 (the 451, twice), 4",
			len(events), len(messages), e.count("receipts"), failed, box.refused)
	}
}
