package tests

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/models"
	"github.com/shop/shop/notify"
	"github.com/shop/shop/outbox"
)

// The Standard Webhooks specification's published test vector.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// The shop signs as the specification does (its test vector), and refuses
// a secret that is not whsec_ and the base64 of a key long enough.
func TestWebhookSignaturesMatchTheStandardsTestVector(t *testing.T) {
	key, err := notify.ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := notify.Sign(key, vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody)); got != vectorSignature {
		t.Fatalf("signature %s; want %s", got, vectorSignature)
	}
	for _, bad := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := notify.ParseSecret(bad); err == nil {
			t.Errorf("secret %q accepted", bad)
		}
	}
}

// receiver is the merchant's endpoint: it verifies every signature (with
// its own HMAC, not the shop's code), refuses each delivery's first
// attempt with a 500 when flaky, and counts what it was sent and accepted.
type receiver struct {
	t        *testing.T
	key      []byte
	flaky    bool
	refuse   bool // every attempt
	hangOnce bool // the first request, until the sender gives up on it
	mu       sync.Mutex
	sent     map[string]int
	accepted map[string]int
	bodies   map[string][]string // each webhook-id's bodies, as sent
	bad      int
}

func newReceiver(t *testing.T) (*receiver, *httptest.Server) {
	key, err := notify.ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, key: key, sent: map[string]int{}, accepted: map[string]int{}, bodies: map[string][]string{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id, ts := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp")
	mac := hmac.New(sha256.New, r.key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	r.mu.Lock()
	hang := r.hangOnce
	r.hangOnce = false
	n := r.sent[id]
	r.sent[id]++
	r.bodies[id] = append(r.bodies[id], string(body))
	sec, err := strconv.ParseInt(ts, 10, 64)
	var ev struct{ ID string }
	if req.Header.Get("webhook-signature") != want || err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute ||
		json.Unmarshal(body, &ev) != nil {
		r.bad++
		r.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	refuse := r.refuse || (r.flaky && n == 0)
	if !refuse && !hang {
		r.accepted[id]++
	}
	r.mu.Unlock()
	if hang {
		<-req.Context().Done()
		return
	}
	if refuse {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// factEvents are every event the fact paths wrote: one per order placed,
// payment settled, refund given back or order cancelled.
func (e *env) factEvents() []outbox.Event {
	e.t.Helper()
	var events []outbox.Event
	if err := e.db.Order("seq").Find(&events).Error; err != nil {
		e.t.Fatal(err)
	}
	return events
}

// sender posts to url on the test's clock: each round, the clock moves
// past any backoff and every delivery due is tried once.
func (e *env) sender(url string, maxAttempts int) *notify.Sender {
	key, err := notify.ParseSecret(vectorSecret)
	if err != nil {
		e.t.Fatal(err)
	}
	return &notify.Sender{DB: e.db, URL: url, Key: key, MaxAttempts: maxAttempts, Timeout: 300 * time.Millisecond,
		Backoff: time.Second, MaxBackoff: 10 * time.Second, Logger: slog.New(slog.DiscardHandler), Client: &http.Client{}, Now: e.clock.Now}
}

// rounds runs the sender until a round sends nothing, at most max rounds,
// and reports the attempts made.
func (e *env) rounds(s *notify.Sender, max int) int {
	e.t.Helper()
	total := 0
	for range max {
		e.clock.Advance(time.Minute)
		n, err := s.SendDue(e.t.Context())
		if err != nil {
			e.t.Fatal(err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
	e.t.Fatalf("still sending after %d rounds", max)
	return total
}

// deliveries lists every webhook delivery through the API, as staff, a
// page of limit at a time.
func (e *env) deliveries(token string, limit int) []map[string]any {
	e.t.Helper()
	var all []map[string]any
	path := "/api/v1/webhook-deliveries?limit=" + strconv.Itoa(limit)
	for range 100 {
		r := e.do(request{method: "GET", path: path, token: token})
		if r.Status != http.StatusOK {
			e.t.Fatalf("list deliveries: %d %s", r.Status, r.Body)
		}
		var page struct {
			Deliveries []map[string]any `json:"webhook_deliveries"`
			Next       *string          `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			e.t.Fatal(err)
		}
		all = append(all, page.Deliveries...)
		if page.Next == nil {
			return all
		}
		path = "/api/v1/webhook-deliveries?limit=" + strconv.Itoa(limit) + "&after=" + *page.Next
	}
	e.t.Fatal("the listing does not end")
	return nil
}

// Every fact is one webhook delivery, however often its event is handed to
// the consumer; the merchant's endpoint, which verifies every signature,
// refuses each first attempt with a 500 and then sees each webhook-id again
// and accepts it, once. Deliveries = facts; each is listed, for staff
// only, with its two attempts.
func TestEveryWebhookIsDeliveredAgainAfterA500(t *testing.T) {
	e := newEnv(t)
	e.paidThroughRetries(3)
	events := e.factEvents()
	e.handleAll(notify.Webhooks{}, events, 3)
	if n := e.count("webhook_deliveries"); n != int64(len(events)) || n != 7 {
		t.Fatalf("%d deliveries for %d events (3 placed, 3 paid, 1 refunded)", n, len(events))
	}
	recv, srv := newReceiver(t)
	recv.flaky = true
	if n := e.rounds(e.sender(srv.URL, 8), 10); n != 2*len(events) {
		t.Errorf("%d attempts; want 2 per delivery", n)
	}
	if recv.bad != 0 || len(recv.sent) != len(events) {
		t.Fatalf("%d bad signatures; %d webhook-ids sent for %d events", recv.bad, len(recv.sent), len(events))
	}
	for _, ev := range events {
		if recv.sent[ev.ID] != 2 || recv.accepted[ev.ID] != 1 {
			t.Errorf("%s: sent %d times, accepted %d; want refused once, then accepted", ev.ID, recv.sent[ev.ID], recv.accepted[ev.ID])
		}
	}
	staff, _ := e.staffToken("staff@example.com")
	listed := e.deliveries(staff, 3)
	if len(listed) != len(events) {
		t.Fatalf("%d deliveries listed; want %d", len(listed), len(events))
	}
	for _, d := range listed {
		attempts := d["attempts"].([]any)
		if d["state"] != "delivered" || len(attempts) != 2 || attempts[0].(map[string]any)["status_code"] != 500.0 ||
			attempts[1].(map[string]any)["status_code"] != 204.0 {
			t.Errorf("delivery %v; want delivered after a 500 and a 204", d)
		}
	}
	shopper := e.signUp("shopper@example.com")
	isProblem(t, e.do(request{method: "GET", path: "/api/v1/webhook-deliveries", token: shopper}), http.StatusForbidden, "/problems/forbidden")
}

// An endpoint that times out, then refuses, is tried WEBHOOK_MAX_ATTEMPTS
// times and no more: the delivery is failed, listed with each attempt, its
// time, status (0 for the timeout) and error.
func TestAWebhookDeliveryFailsAfterItsMaxAttempts(t *testing.T) {
	e := newEnv(t)
	_, orderID := e.shopperOrder("failing@example.com")
	events := e.factEvents()
	e.handleAll(notify.Webhooks{}, events, 1)
	recv, srv := newReceiver(t)
	recv.refuse, recv.hangOnce = true, true
	sender := e.sender(srv.URL, 3)
	if n := e.rounds(sender, 10); n != 3*len(events) {
		t.Errorf("%d attempts; want 3 per delivery", n)
	}
	e.clock.Advance(24 * time.Hour)
	if n, err := sender.SendDue(t.Context()); n != 0 || err != nil {
		t.Errorf("a failed delivery was tried again: %d attempts, %v", n, err)
	}
	if e.count("webhook_deliveries", "state = ?", models.DeliveryFailed) != int64(len(events)) || e.count("webhook_attempts") != int64(3*len(events)) {
		t.Fatalf("%d failed deliveries, %d attempts; want every one failed after 3", e.count("webhook_deliveries", "state = ?", models.DeliveryFailed), e.count("webhook_attempts"))
	}
	staff, _ := e.staffToken("staff@example.com")
	timeouts := 0
	for _, d := range e.deliveries(staff, 20) {
		attempts := d["attempts"].([]any)
		if d["state"] != "failed" || d["attempt_count"] != 3.0 || len(attempts) != 3 || d["order_id"] != orderID {
			t.Errorf("delivery %v; want failed after 3 attempts", d)
		}
		for _, a := range attempts {
			a := a.(map[string]any)
			if a["error"] == "" || a["attempted_at"] == "" {
				t.Errorf("an attempt without its error or time: %v", a)
			}
			if a["status_code"] == 0.0 && strings.Contains(a["error"].(string), "deadline") {
				timeouts++
			}
		}
	}
	if timeouts != 1 {
		t.Errorf("%d attempts recorded as timed out; want the one the endpoint held", timeouts)
	}
}

// Two senders (two instances) look for due deliveries at once: the claim
// gives each delivery to one of them, so the endpoint is sent each
// webhook-id once, and each delivery has one attempt.
func TestTwoSendersPostEachDeliveryOnce(t *testing.T) {
	e := newEnv(t)
	e.paidThroughRetries(3)
	events := e.factEvents()
	e.handleAll(notify.Webhooks{}, events, 1)
	recv, srv := newReceiver(t)
	senders := []*notify.Sender{e.sender(srv.URL, 8), e.sender(srv.URL, 8)}
	e.clock.Advance(time.Minute)
	start := make(chan struct{})
	counts := make([]int, len(senders))
	var wg sync.WaitGroup
	for i, s := range senders {
		wg.Go(func() {
			<-start
			n, err := s.SendDue(t.Context())
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	close(start)
	wg.Wait()
	if counts[0]+counts[1] != len(events) || len(recv.sent) != len(events) || e.count("webhook_attempts") != int64(len(events)) {
		t.Fatalf("attempts %v, %d webhook-ids sent, %d attempts recorded; want each of %d deliveries once", counts, len(recv.sent), e.count("webhook_attempts"), len(events))
	}
	for id, n := range recv.sent {
		if n != 1 {
			t.Errorf("%s sent %d times", id, n)
		}
	}
}
