package middleware

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"

	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
)

// pushSecret is the secret the tests' instances share.
var pushSecret = []byte(strings.Repeat("s", MinPushSecret))

// testPusher is a pusher that only encodes and decodes, under pushSecret.
func testPusher(id string, a *answers) *pusher {
	return &pusher{id: id, auth: &pushAuth{secret: pushSecret}, answers: a, logger: slog.New(slog.DiscardHandler)}
}

// notifier sends pushes to the instances' channel as anyone who can
// connect to the database could: a plain connection of its own, outside
// the middleware. On SQLite, which has no NOTIFY, it hands each payload to
// the receiving instances as their listener would.
type notifier struct {
	t         *testing.T
	conn      *pgx.Conn // nil on SQLite
	channel   string
	receivers []*pusher
	barriers  int
}

func newNotifier(t *testing.T, d *counted, receivers ...*Idempotency) *notifier {
	t.Helper()
	n := &notifier{t: t, channel: "idempotency:main"}
	if !database.IsPostgres(d.db) {
		for _, r := range receivers {
			n.receivers = append(n.receivers, testPusher("receiver", r.answers))
		}
		return n
	}
	conn, err := pgx.Connect(t.Context(), d.db.Dialector.(*postgres.Dialector).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if err := conn.QueryRow(t.Context(), "SELECT 'idempotency:' || current_schema()").Scan(&n.channel); err != nil {
		t.Fatal(err)
	}
	n.conn = conn
	return n
}

func (n *notifier) notify(payload string) {
	n.t.Helper()
	if n.conn == nil {
		for _, r := range n.receivers { // from a backend that is not theirs (testPusher's sender is 0)
			r.receive(n.channel, &pgconn.Notification{PID: 1, Channel: n.channel, Payload: payload})
		}
		return
	}
	if _, err := n.conn.Exec(n.t.Context(), "SELECT pg_notify($1, $2)", n.channel, payload); err != nil {
		n.t.Fatal(err)
	}
}

// refused is how many pushes the receivers dropped, one count per receiver.
func (n *notifier) refused(instances ...*Idempotency) []uint64 {
	counts := make([]uint64, len(instances))
	for i, m := range instances {
		counts[i] = m.PushesRefused()
		if n.conn == nil {
			counts[i] = n.receivers[i].auth.refused.Load()
		}
	}
	return counts
}

// barrier sends a signed push after those sent before, and waits until
// every instance holds it: a listener reads the notifications of one
// connection in the order they were sent, so by then it has handled every
// push before it, kept or dropped. Bounded: a push that never arrives
// fails the test.
func (n *notifier) barrier(instances ...*Idempotency) {
	n.t.Helper()
	n.barriers++
	k := scopedKey{"barrier", fmt.Sprint(n.barriers)}
	v := &cached{scopedKey: k, replayOf: replayOf{1, "op"}, method: "POST", route: "/widgets/:id", expiresAt: time.Now().Add(time.Hour)}
	n.notify(testPusher("barrier", nil).encode(n.channel, []*cached{v})[0])
	for _, m := range instances {
		untilCached(n.t, m, k.scope, k.key)
	}
}

// forgedAnswer is a made-up answer for scope's key, as a forger writes it
// by hand: the real fingerprint (which a genuine push, or the key's row,
// shows), a redirect to a phishing page, a session cookie and a body of
// its own.
func forgedAnswer(scope, key, fingerprint string, expires time.Time) string {
	raw := base64.StdEncoding.EncodeToString(make([]byte, 32))
	return fmt.Sprintf(`{"from":"forger","scope":%q,"key":%q,"op":"forged-op","method":"POST","route":"/widgets/:id","fp":%q,"raw":%q,`+
		`"exp":%q,"status":201,"headers":{"Location":["https://evil.example/phish"],"Set-Cookie":["shop_session=attacker"]},"body":%q}`,
		scope, key, fingerprint, raw, expires.Format(time.RFC3339Nano), base64.StdEncoding.EncodeToString([]byte(`{"ref":"forged"}`)))
}

func answerOfResponse(t *testing.T, r *http.Response) answer {
	t.Helper()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{r.StatusCode, r.Header, string(body)}
}

// A NOTIFY that anyone who can connect to the database can send, a
// read-only role included, with a made-up answer for a real user's key and
// its real fingerprint, changes no answer: unsigned, or signed with another
// secret, it is dropped and counted by both instances, and the retry on
// either gets the answer the database holds, or, for a key not used yet,
// a fresh execution. (On SQLite, which has no NOTIFY, the payloads go
// straight to what the listener would hand them to.)
func TestForgedPushChangesNoAnswer(t *testing.T) {
	d := newCounted(t)
	clock := testkit.NewClock(time.Now().UTC())
	origin, a := d.pushing(t, clock.Now)
	other, b := d.pushing(t, clock.Now)
	real := answerOfResponse(t, serveAs(a, "alice", "k", "", `{"n":1}`))
	if real.status != http.StatusCreated {
		t.Fatalf("fresh: %d %s", real.status, real.body)
	}
	if database.IsPostgres(d.db) {
		untilCached(t, other, "alice", "k")
	}
	entry, ok := origin.answers.get(scopedKey{"alice", "k"})
	if !ok {
		t.Fatal("the instance that ran the order does not hold its answer")
	}
	n := newNotifier(t, d, origin, other)
	expires := clock.Now().Add(time.Hour)
	otherSecret := &pushAuth{secret: []byte(strings.Repeat("x", MinPushSecret))}
	var forged []string
	for _, key := range []string{"k", "unused"} { // a key alice used, and one she will use
		msg := forgedAnswer("alice", key, entry.fingerprint, expires)
		forged = append(forged, msg, otherSecret.sign(n.channel, []byte(msg)),
			base64.StdEncoding.EncodeToString(make([]byte, 32))+msg)
	}
	for _, p := range forged {
		n.notify(p)
	}
	n.barrier(origin, other)

	widgets := func() int64 {
		var count int64
		if err := d.db.Model(&widget{}).Count(&count).Error; err != nil {
			t.Fatal(err)
		}
		return count
	}
	for name, h := range map[string]http.Handler{"origin": a, "other": b} {
		got := answerOfResponse(t, serveAs(h, "alice", "k", "", `{"n":1}`))
		if got.status != real.status || got.body != real.body || got.header.Get(ReplayedHeader) != "true" ||
			got.header.Get("Location") != "" || got.header.Get("Set-Cookie") != "" {
			t.Fatalf("retry on the %s instance: %d %v %s; want the stored %d %s", name, got.status, got.header, got.body, real.status, real.body)
		}
	}
	if w := widgets(); w != 1 {
		t.Fatalf("%d widgets after the retries, want 1", w)
	}
	fresh := answerOfResponse(t, serveAs(b, "alice", "unused", "", `{"n":1}`))
	var ref struct{ Ref string }
	if err := json.Unmarshal([]byte(fresh.body), &ref); err != nil || fresh.status != http.StatusCreated ||
		fresh.header.Get(ReplayedHeader) != "" || ref.Ref == "" || ref.Ref == "forged" || fresh.header.Get("Set-Cookie") != "" {
		t.Fatalf("first use of the key forged ahead: %d %v %s; want a fresh execution", fresh.status, fresh.header, fresh.body)
	}
	if w := widgets(); w != 2 {
		t.Fatalf("%d widgets after the first use of the other key, want 2", w)
	}
	if got := n.refused(origin, other); got[0] != uint64(len(forged)) || got[1] != uint64(len(forged)) {
		t.Fatalf("dropped pushes %v, want %d on each instance", got, len(forged))
	}
}

// A push signed with the instances' secret still carries only what a
// replay sends: a Set-Cookie in it, or any header outside the replay
// allow-list, is never replayed.
func TestSignedPushIsReplayedWithoutSetCookie(t *testing.T) {
	d := newCounted(t)
	clock := testkit.NewClock(time.Now().UTC())
	origin, a := d.pushing(t, clock.Now)
	other, b := d.pushing(t, clock.Now)
	real := answerOfResponse(t, serveAs(a, "alice", "k", "", `{"n":1}`))
	entry, ok := origin.answers.get(scopedKey{"alice", "k"})
	if real.status != http.StatusCreated || !ok {
		t.Fatalf("fresh: %d %s, cached %v", real.status, real.body, ok)
	}
	n := newNotifier(t, d, other)
	signed := *entry
	signed.scopedKey, signed.operationID = scopedKey{"alice", "signed"}, "op-signed"
	signed.headers = http.Header{
		"Content-Type": {"application/json"}, "Location": {"/widgets/9"},
		"Set-Cookie": {"shop_session=attacker"}, "X-Extra": {"1"},
	}
	signed.body = []byte(`{"ref":"signed"}`)
	payloads := (&pusher{id: "sender", auth: &pushAuth{secret: pushSecret}}).encode(n.channel, []*cached{&signed})
	if len(payloads) != 1 {
		t.Fatalf("%d payloads, want 1", len(payloads))
	}
	n.notify(payloads[0])
	untilCached(t, other, "alice", "signed")
	d.pool.take()
	d.pool.inTx = nil
	got := answerOfResponse(t, serveAs(b, "alice", "signed", "", `{"n":1}`))
	if got.status != http.StatusCreated || got.body != `{"ref":"signed"}` || got.header.Get(ReplayedHeader) != "true" ||
		got.header.Get("Location") != "/widgets/9" || got.header.Values("Set-Cookie") != nil || got.header.Get("X-Extra") != "" {
		t.Fatalf("replay of the signed push: %d %v %s", got.status, got.header, got.body)
	}
	d.pool.wantCost(t, "replay of the signed push", "[]", 0, "[]")
	if refused := n.refused(other); refused[0] != 0 {
		t.Fatalf("%d signed pushes dropped, want 0", refused[0])
	}
}

// The MAC covers every byte of the payload and the channel: a payload with
// any byte changed, or sent on another shop's channel, or signed with
// another secret, is dropped; the signed one is kept.
func TestPushSignatureCoversEveryByteAndTheChannel(t *testing.T) {
	now := time.Now()
	a := &cached{
		scopedKey: scopedKey{"alice", "k"}, replayOf: replayOf{1, "op-1"}, method: "POST", route: "/widgets/:id", fingerprint: "f1",
		expiresAt: now.Add(time.Hour), status: http.StatusCreated, headers: http.Header{"Location": {"/widgets/1"}}, body: []byte(`{}`),
	}
	payload := testPusher("a", nil).encode("idempotency:main", []*cached{a})[0]
	receiver := testPusher("b", nil)
	if _, ok := receiver.decode("idempotency:main", payload); !ok {
		t.Fatal("the signed payload was dropped")
	}
	if _, ok := receiver.decode("idempotency:other", payload); ok {
		t.Fatal("a payload signed for another channel was kept")
	}
	stranger := &pusher{id: "b", auth: &pushAuth{secret: []byte(strings.Repeat("x", MinPushSecret))}, logger: receiver.logger}
	if _, ok := stranger.decode("idempotency:main", payload); ok {
		t.Fatal("a payload signed with another secret was kept")
	}
	for i := range len(payload) {
		changed := []byte(payload)
		changed[i] ^= 0x01
		if _, ok := receiver.decode("idempotency:main", string(changed)); ok {
			t.Fatalf("byte %d changed (%q), and the payload was kept", i, payload[i])
		}
	}
	if want := uint64(len(payload) + 1); receiver.auth.refused.Load() != want {
		t.Fatalf("%d payloads counted as refused, want %d", receiver.auth.refused.Load(), want)
	}
}

// A listener skips what its own instance's sending backend notified,
// unread: not even its MAC is checked, and it is not counted refused. The
// same notification from any other backend is read: an unsigned one is
// refused and counted, a signed one cached. Without the skip, the unsigned
// one from the sender would be counted, and the signed one cached, too.
func TestOwnSendersPushIsSkippedUnread(t *testing.T) {
	receiver := testPusher("b", newAnswers(0, time.Now))
	receiver.sender.Store(42) // the PID of the backend this instance sends on
	a := &cached{
		scopedKey: scopedKey{"alice", "k"}, replayOf: replayOf{1, "op-1"}, method: "POST", route: "/widgets/:id", fingerprint: "f1",
		expiresAt: time.Now().Add(time.Hour), status: http.StatusCreated, headers: http.Header{"Location": {"/widgets/1"}}, body: []byte(`{}`),
	}
	signed := testPusher("a", nil).encode("idempotency:main", []*cached{a})[0]
	unsigned := forgedAnswer("alice", "forged", "f1", time.Now().Add(time.Hour))
	for _, payload := range []string{unsigned, signed} {
		receiver.receive("idempotency:main", &pgconn.Notification{PID: 42, Channel: "idempotency:main", Payload: payload})
	}
	if _, ok := receiver.answers.get(a.scopedKey); ok || receiver.auth.refused.Load() != 0 {
		t.Fatalf("from its own sender: cached %v, %d refused; want nothing read", ok, receiver.auth.refused.Load())
	}
	for _, payload := range []string{unsigned, signed} {
		receiver.receive("idempotency:main", &pgconn.Notification{PID: 43, Channel: "idempotency:main", Payload: payload})
	}
	if _, ok := receiver.answers.get(a.scopedKey); !ok || receiver.auth.refused.Load() != 1 {
		t.Fatalf("from another backend: cached %v, %d refused; want the signed one cached, the unsigned one refused", ok, receiver.auth.refused.Load())
	}
}
