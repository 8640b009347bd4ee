package middleware

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
)

// pushing is an instance of the middleware over the counted pool that
// pushes its answers (on PostgreSQL) and keeps the others', on the clock
// now. Its handler writes one widget and answers ?status (201 by default).
func (d *counted) pushing(t *testing.T, now func() time.Time) (*Idempotency, http.Handler) {
	t.Helper()
	mw := New(Config{
		DB: d.over, TTL: time.Hour, Lease: time.Minute, Wait: time.Second, FlushEvery: time.Hour, Now: now, PushAnswers: true, PushSecret: pushSecret,
		Scope:  func(c *gin.Context) string { return c.GetHeader("X-Test-User") },
		Logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(func() { _ = mw.Close(context.Background()) })
	if database.IsPostgres(d.db) != (mw.push != nil) {
		t.Fatalf("pushing on PostgreSQL only: postgres %v, pusher %v", database.IsPostgres(d.db), mw.push != nil)
	}
	if mw.push != nil {
		select {
		case <-mw.push.listening:
		case <-time.After(10 * time.Second):
			t.Fatal("the instance did not start listening")
		}
	}
	r := gin.New()
	r.POST("/widgets/:id", mw.RequireAtomic(), func(c *gin.Context) {
		if err := Tx(c).Create(&widget{Ref: DerivedKey(c)}).Error; err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		status := http.StatusCreated
		if s := c.Query("status"); s != "" {
			status, _ = strconv.Atoi(s)
		}
		c.JSON(status, gin.H{"ref": DerivedKey(c)})
	})
	return mw, r
}

// serveAs sends a widget request of user's with key to h.
func serveAs(h http.Handler, user, key, query, body string) *http.Response {
	req := httptest.NewRequest(http.MethodPost, "/widgets/1"+query, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-User", user)
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

// untilCached waits until mw holds the answer of (scope, key): on
// PostgreSQL the push of another instance brings it. Bounded: a push that
// never comes fails the test.
func untilCached(t *testing.T, mw *Idempotency, scope, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := mw.answers.get(scopedKey{scope, key}); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answer of %s/%s was never pushed", scope, key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A retry that lands on the instance that did not run the original is
// replayed there from the pushed answer, with no statement at all, on
// PostgreSQL; on SQLite, which has no pushes, with one read.
func TestPushedAnswerReplaysWithoutARead(t *testing.T) {
	d := newCounted(t)
	clock := testkit.NewClock(time.Now().UTC())
	_, a := d.pushing(t, clock.Now)
	other, b := d.pushing(t, clock.Now)
	first := serveAs(a, "alice", "k", "", `{"n":1}`)
	if first.StatusCode != http.StatusCreated {
		t.Fatalf("fresh: %d", first.StatusCode)
	}
	want := "[SELECT]"
	if database.IsPostgres(d.db) {
		untilCached(t, other, "alice", "k")
		want = "[]"
	}
	d.pool.take()
	d.pool.inTx = nil
	retry := serveAs(b, "alice", "k", "", `{"n":1}`)
	if retry.StatusCode != http.StatusCreated || retry.Header.Get(ReplayedHeader) != "true" {
		t.Fatalf("retry on the other instance: %d %v", retry.StatusCode, retry.Header)
	}
	d.pool.wantCost(t, "retry on the other instance", want, 0, "[]")
	var widgets int64
	if err := d.db.Model(&widget{}).Count(&widgets).Error; err != nil || widgets != 1 {
		t.Fatalf("%d widgets (%v), want 1", widgets, err)
	}
}

// What an instance was pushed never replays what the database would not:
// a released key runs again, another user's key of the same name is
// another operation, and an expired key is a new operation — even when its
// push arrives after it expired.
func TestPushedAnswersNeverReplayWhatTheDatabaseWouldNot(t *testing.T) {
	d := newCounted(t)
	clock := testkit.NewClock(time.Now().UTC())
	origin, a := d.pushing(t, clock.Now)
	other, b := d.pushing(t, clock.Now)
	widgets := func() int64 {
		t.Helper()
		var n int64
		if err := d.db.Model(&widget{}).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	runs := func(h http.Handler, what, user, key, query string, status int) {
		t.Helper()
		before := widgets()
		r := serveAs(h, user, key, query, `{"n":1}`)
		if r.StatusCode != status || r.Header.Get(ReplayedHeader) != "" {
			t.Fatalf("%s: %d %v, want %d, not replayed", what, r.StatusCode, r.Header, status)
		}
		want := before
		if status < 400 {
			want++ // a kept answer's widget; a failed attempt's is rolled back
		}
		if widgets() != want {
			t.Fatalf("%s: %d widgets, want %d", what, widgets(), want)
		}
	}

	// Released: the attempt failed, nothing was kept, so nothing is pushed.
	runs(a, "failed attempt", "alice", "released", "?status=503", http.StatusServiceUnavailable)
	// A later key's push is the barrier: one sender sends in order.
	runs(a, "barrier", "alice", "barrier", "", http.StatusCreated)
	if database.IsPostgres(d.db) {
		untilCached(t, other, "alice", "barrier")
	}
	if _, ok := other.answers.get(scopedKey{"alice", "released"}); ok {
		t.Fatal("a released key's answer reached the other instance")
	}
	runs(b, "retry of the released key on the other instance", "alice", "released", "", http.StatusCreated)

	// Another scope: alice's answer is not bob's.
	runs(a, "alice's order", "alice", "shared", "", http.StatusCreated)
	if database.IsPostgres(d.db) {
		untilCached(t, other, "alice", "shared")
	}
	runs(b, "bob, with the key alice used", "bob", "shared", "", http.StatusCreated)

	// Expired: once the TTL passed, the key names a new operation, on the
	// instance that was pushed the old answer as in the database.
	runs(a, "an order that will expire", "alice", "expiring", "", http.StatusCreated)
	if database.IsPostgres(d.db) {
		untilCached(t, other, "alice", "expiring")
	}
	entry, ok := origin.answers.get(scopedKey{"alice", "expiring"})
	if !ok {
		t.Fatal("the instance that ran the order does not hold its answer")
	}
	payload := testPusher("origin", nil).encode("c", []*cached{entry})
	clock.Advance(2 * time.Hour)
	runs(b, "the expired key on the other instance", "alice", "expiring", "", http.StatusCreated)
	// A push that arrives after its key expired is not kept.
	late := testPusher("late", newAnswers(0, clock.Now))
	if len(payload) != 1 {
		t.Fatalf("%d payloads, want 1", len(payload))
	}
	v, ok := late.decode("c", payload[0])
	if k := (scopedKey{v.scope, v.key}); !ok || k != (scopedKey{"alice", "expiring"}) || v.operationID != entry.operationID {
		t.Fatalf("decode: %v %+v %v", k, v, ok)
	}
	late.answers.put(v)
	if _, ok := late.answers.get(scopedKey{"alice", "expiring"}); ok {
		t.Fatal("an answer pushed after its key expired was kept")
	}
}

// A pushed answer is the one the database holds, byte for byte: status,
// headers as stored, body, operation and fingerprint; one too large for
// NOTIFY is not sent at all, and one without its key's row is not kept.
func TestPushPayloadCarriesTheStoredAnswer(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	a := &cached{
		scopedKey: scopedKey{"alice", "k"}, replayOf: replayOf{1, "op-1"}, method: "POST", route: "/widgets/:id", fingerprint: "f1",
		expiresAt: now.Add(time.Hour), status: http.StatusCreated,
		headers: http.Header{"Content-Type": {"application/json"}, "Location": {"/widgets/1"}, "ETag": {`"v1"`}}, body: []byte(`{"ok":true}`),
	}
	a.raw[0] = 7
	payloads := testPusher("a", nil).encode("c", []*cached{a})
	if len(payloads) != 1 {
		t.Fatalf("%d payloads, want 1", len(payloads))
	}
	receiver := testPusher("b", newAnswers(0, func() time.Time { return now }))
	got, ok := receiver.decode("c", payloads[0])
	if k := (scopedKey{got.scope, got.key}); !ok || k != (scopedKey{"alice", "k"}) || got.replayOf != a.replayOf || got.method != a.method || got.route != a.route ||
		got.fingerprint != a.fingerprint || got.raw != a.raw || !got.expiresAt.Equal(a.expiresAt) || got.status != a.status ||
		string(got.body) != string(a.body) || got.headers.Get("Location") != "/widgets/1" ||
		strings.Join(got.headers["ETag"], ",") != `"v1"` || len(got.headers) != 3 {
		t.Fatalf("decoded %+v %v; want %+v", got, ok, a)
	}
	if _, ok := testPusher("a", nil).decode("c", payloads[0]); ok {
		t.Fatal("an instance kept its own push")
	}
	rowless := *a // from an instance that does not send the key's row: a replay there reads it
	rowless.keyID = 0
	if _, ok := receiver.decode("c", testPusher("a", nil).encode("c", []*cached{&rowless})[0]); ok {
		t.Fatal("an answer pushed without its key's row was kept")
	}
	big := *a
	big.key, big.body = "big", make([]byte, notifyLimit)
	if p := testPusher("a", nil).encode("c", []*cached{&big}); len(p) != 0 {
		t.Fatalf("an answer too large for NOTIFY was encoded: %d bytes", len(p[0]))
	}
}
