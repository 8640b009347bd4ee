package middleware

// Completed answers pushed to the other instances' caches on PostgreSQL
// (LISTEN/NOTIFY), so that a retry landing elsewhere replays from memory
// too. Only committed answers are pushed, kept until their key's expiry; a
// push lost or dropped only means a read of the database. Anyone who can
// connect can NOTIFY, so a push is kept only with an HMAC-SHA256, under
// Config.PushSecret, of its channel (not another schema's shop) and its
// exact bytes, checked before the JSON is parsed. Signed, not encrypted:
// replaying a payload seen by LISTEN is harmless.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

const (
	notifyLimit   = 8000 - 1 // PostgreSQL refuses a NOTIFY payload of 8000 bytes or more
	pushQueue     = 4096     // answers waiting to be sent; more are dropped
	pushBatch     = 64       // answers sent in one statement at most
	pushGather    = 5 * time.Millisecond
	pushRetry     = time.Second
	MinPushSecret = 32 // the shortest Config.PushSecret accepted, in bytes
	// pushLabel opens every MAC: nothing else signed with the secret is a push.
	pushLabel = "idempotency push v1\x00"
)

// macLen is the length of a payload's MAC as sent: base64 of a SHA-256 HMAC.
var macLen = base64.StdEncoding.EncodedLen(sha256.Size)

type pushMessage struct {
	From        string      `json:"from"` // the sending instance, which ignores its own
	KeyID       uint        `json:"id"`   // the key's row, whose replay count a replay adds to
	Scope       string      `json:"scope"`
	Key         string      `json:"key"`
	OperationID string      `json:"op"`
	Method      string      `json:"method"`
	Route       string      `json:"route"`
	Fingerprint string      `json:"fp"`
	Raw         []byte      `json:"raw"`
	ExpiresAt   time.Time   `json:"exp"`
	Status      int         `json:"status"`
	Headers     http.Header `json:"headers"`
	Body        []byte      `json:"body"`
}

// pusher sends this instance's answers and caches the others'; nil when not pushing.
type pusher struct {
	dsn, id   string
	auth      *pushAuth
	answers   *answers
	logger    *slog.Logger
	queue     chan *cached
	sender    atomic.Uint32 // the backend of the connection sendLoop notifies on; 0 while none
	stop      context.CancelFunc
	done      sync.WaitGroup
	listening chan struct{} // closed once the first LISTEN is in place
}

// newPusher pushes on PostgreSQL with a secret to sign with: without one, pushes are forgeable.
func newPusher(db *gorm.DB, a *answers, logger *slog.Logger, secret []byte) *pusher {
	d, ok := db.Dialector.(*postgres.Dialector)
	if !ok || d.Config == nil || d.DSN == "" {
		return nil
	}
	if len(secret) == 0 {
		logger.Warn("idempotency: PushAnswers without a PushSecret: answers are not pushed between instances")
		return nil
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &pusher{
		dsn: d.DSN, id: uuid.NewString(), auth: &pushAuth{secret: secret}, answers: a, logger: logger,
		queue: make(chan *cached, pushQueue), stop: stop, listening: make(chan struct{}),
	}
	p.done.Go(func() { p.sendLoop(ctx) })
	p.done.Go(func() { p.listenLoop(ctx) })
	return p
}

func (p *pusher) close() {
	if p != nil {
		p.stop()
		p.done.Wait()
	}
}

// publish queues a committed answer for the others; dropped when full.
func (p *pusher) publish(v *cached) {
	if p == nil {
		return
	}
	select {
	case p.queue <- v:
	default:
	}
}

// connect opens a connection outside the pool, with its schema's channel: schemas share no answers.
func (p *pusher) connect(ctx context.Context) (*pgx.Conn, string, error) {
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return nil, "", err
	}
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		conn.Close(context.Background())
		return nil, "", err
	}
	name := "idempotency:" + schema
	if len(name) > 63 { // a channel is an identifier: at most 63 bytes
		sum := sha256.Sum256([]byte(schema))
		name = "idempotency:" + hex.EncodeToString(sum[:20])
	}
	return conn, name, nil
}

func (p *pusher) sendLoop(ctx context.Context) {
	var conn *pgx.Conn
	var name string
	drop := func() {
		if conn != nil {
			p.sender.Store(0) // before the backend ends and its PID may be another's
			conn.Close(context.Background())
			conn = nil
		}
	}
	defer drop()
	for {
		var batch []*cached
		select {
		case <-ctx.Done():
			return
		case first := <-p.queue:
			batch = p.gather(ctx, append(batch, first))
		}
		var err error
		if conn == nil {
			if conn, name, err = p.connect(ctx); err == nil {
				p.sender.Store(conn.PgConn().PID())
			}
		}
		if err == nil {
			if payloads := p.encode(name, batch); len(payloads) > 0 {
				_, err = conn.Exec(ctx, "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload", name, payloads)
			}
		}
		if err != nil && ctx.Err() == nil {
			p.logger.Warn("idempotency: push completed answers", "err", err, "dropped", len(batch))
			drop()
			select {
			case <-ctx.Done():
			case <-time.After(pushRetry):
			}
		}
	}
}

func (p *pusher) gather(ctx context.Context, batch []*cached) []*cached {
	timer := time.NewTimer(pushGather)
	defer timer.Stop()
	for len(batch) < pushBatch {
		select {
		case b := <-p.queue:
			batch = append(batch, b)
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// encode signs answers, leaving out what NOTIFY cannot carry: too large, or not exact in JSON.
func (p *pusher) encode(channel string, batch []*cached) []string {
	payloads := make([]string, 0, len(batch))
	for _, b := range batch {
		if !utf8.ValidString(b.scope) || !utf8.ValidString(b.key) {
			continue
		}
		msg, err := json.Marshal(pushMessage{
			From: p.id, KeyID: b.keyID, Scope: b.scope, Key: b.key, OperationID: b.operationID,
			Method: b.method, Route: b.route, Fingerprint: b.fingerprint, Raw: b.raw[:],
			ExpiresAt: b.expiresAt, Status: b.status, Headers: b.headers, Body: b.body,
		})
		if err == nil && macLen+len(msg) <= notifyLimit {
			payloads = append(payloads, p.auth.sign(channel, msg))
		}
	}
	return payloads
}

func (p *pusher) listenLoop(ctx context.Context) {
	listening := sync.OnceFunc(func() { close(p.listening) })
	for ctx.Err() == nil {
		if err := p.listen(ctx, listening); err != nil && ctx.Err() == nil {
			p.logger.Warn("idempotency: listen for pushed answers", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(pushRetry):
			}
		}
	}
}

// listen caches what the others push until its connection fails.
func (p *pusher) listen(ctx context.Context, listening func()) error {
	conn, name, err := p.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		p.receive(name, n)
	}
}

// receive caches a pushed answer, unless this instance's own sending backend sent it: that one
// is skipped unread, not even its MAC checked.
func (p *pusher) receive(channel string, n *pgconn.Notification) {
	if n.PID == p.sender.Load() {
		return
	}
	if v, ok := p.decode(channel, n.Payload); ok {
		p.answers.put(v)
	}
}

// decode reads a payload once its MAC holds; this instance's own come back too, and are ignored.
func (p *pusher) decode(channel, payload string) (*cached, bool) {
	msg, ok := p.auth.verify(channel, payload)
	if !ok {
		p.auth.refused.Add(1)
		p.logger.Warn("idempotency: dropped a pushed answer not signed with the push secret (forged, or from an instance with another secret)",
			"channel", channel, "bytes", len(payload))
		return nil, false
	}
	var m pushMessage
	if json.Unmarshal(msg, &m) != nil || m.From == p.id || len(m.Raw) != sha256.Size || m.KeyID == 0 {
		return nil, false
	}
	k := IdempotencyKey{ID: m.KeyID, Scope: m.Scope, Key: m.Key, OperationID: m.OperationID, Method: m.Method, Route: m.Route, Fingerprint: m.Fingerprint, ExpiresAt: m.ExpiresAt}
	// Whatever the sender stored: never more headers than a replay sends.
	return answerOf(k, [sha256.Size]byte(m.Raw), m.Status, replayable(m.Headers), m.Body), true
}

type pushAuth struct {
	secret  []byte
	refused atomic.Uint64 // payloads dropped because their MAC failed
}

func (a *pushAuth) mac(channel string, msg []byte) []byte {
	h := hmac.New(sha256.New, a.secret)
	h.Write([]byte(pushLabel))
	h.Write([]byte(channel)) // an identifier: it cannot hold the NUL that ends it
	h.Write([]byte{0})
	h.Write(msg)
	return h.Sum(nil)
}

// sign is the payload that carries msg on channel: its MAC, then msg.
func (a *pushAuth) sign(channel string, msg []byte) string {
	return base64.StdEncoding.EncodeToString(a.mac(channel, msg)) + string(msg)
}

// verify returns the message of a payload whose MAC is this secret's.
func (a *pushAuth) verify(channel, payload string) (msg []byte, ok bool) {
	if len(payload) < macLen {
		return nil, false
	}
	want, err := base64.StdEncoding.Strict().DecodeString(payload[:macLen]) // one spelling per MAC
	msg = []byte(payload[macLen:])
	if err != nil || len(want) != sha256.Size || !hmac.Equal(want, a.mac(channel, msg)) {
		return nil, false
	}
	return msg, true
}

// PushesRefused is how many pushed answers this instance dropped, not
// signed with its PushSecret: forged, or from an instance with another.
func (m *Idempotency) PushesRefused() uint64 {
	if m.push == nil {
		return 0
	}
	return m.push.auth.refused.Load()
}
