package middleware

// Completed answers pushed to the other instances' caches, on PostgreSQL,
// through LISTEN/NOTIFY: every instance already shares the database, so a
// retry that lands on an instance that did not run the original is replayed
// from memory there too, with no read.
//
// It is as safe as the cache itself (see cache.go): only a committed
// answer is pushed, after its commit, and a pushed entry is kept under its
// own (scope, key) until its key's expiry, like any entry. A push lost,
// late or dropped (a full queue, an answer too large for NOTIFY, a
// connection down) only means that instance reads the key from the
// database. A push is kept only if signed with the instances' secret
// (pushauth.go), and only with the headers a replay sends.
//
// Each instance holds two connections of its own, outside the requests'
// pool: one listens; one sends, batching what completed meanwhile into one
// statement.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

const (
	// notifyLimit: PostgreSQL refuses a NOTIFY payload of 8000 bytes or
	// more. A larger answer is not pushed; other instances read it on demand.
	notifyLimit = 8000 - 1
	pushQueue   = 4096 // answers waiting to be sent; more are dropped
	pushBatch   = 64   // answers sent in one statement at most
	// pushGather is how long the sender waits for more answers to send in
	// one statement.
	pushGather = 5 * time.Millisecond
	pushRetry  = time.Second
)

// pushMessage is one completed answer as NOTIFY carries it.
type pushMessage struct {
	From        string      `json:"from"` // the sending instance, which ignores its own
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

// pusher sends this instance's completed answers and caches the others'.
// nil: not pushing (SQLite, not asked, no secret).
type pusher struct {
	dsn, id   string
	auth      *pushAuth
	answers   *answers
	logger    *slog.Logger
	queue     chan *cached
	stop      context.CancelFunc
	done      sync.WaitGroup
	listening chan struct{} // closed once the first LISTEN is in place
}

// newPusher starts pushing when db is PostgreSQL and there is a secret to
// sign with: without one, no push could be told from a forgery.
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
	p.done.Add(2)
	go p.sendLoop(ctx)
	go p.listenLoop(ctx)
	return p
}

// close stops both loops and waits for them; what is queued is dropped.
func (p *pusher) close() {
	if p == nil {
		return
	}
	p.stop()
	p.done.Wait()
}

// publish queues a committed answer for the other instances.
func (p *pusher) publish(v *cached) {
	if p == nil {
		return
	}
	select {
	case p.queue <- v:
	default: // full: the others read it from the database
	}
}

// channel is the NOTIFY channel of conn's schema, so that shops in
// different schemas of one database do not share answers.
func channel(ctx context.Context, conn *pgx.Conn) (string, error) {
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return "", err
	}
	name := "idempotency:" + schema
	if len(name) > 63 { // a channel is an identifier: at most 63 bytes
		sum := sha256.Sum256([]byte(schema))
		name = "idempotency:" + hex.EncodeToString(sum[:20])
	}
	return name, nil
}

func (p *pusher) connect(ctx context.Context) (*pgx.Conn, string, error) {
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return nil, "", err
	}
	name, err := channel(ctx, conn)
	if err != nil {
		conn.Close(context.Background())
		return nil, "", err
	}
	return conn, name, nil
}

func (p *pusher) sendLoop(ctx context.Context) {
	defer p.done.Done()
	var conn *pgx.Conn
	var name string
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		var batch []*cached
		select {
		case <-ctx.Done():
			return
		case first := <-p.queue:
			batch = append(batch, first)
		}
		batch = p.gather(ctx, batch)
		var err error
		if conn == nil {
			conn, name, err = p.connect(ctx)
		}
		var payloads []string
		if err == nil {
			payloads = p.encode(name, batch)
		}
		if err == nil && len(payloads) > 0 {
			_, err = conn.Exec(ctx, "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload", name, payloads)
		}
		if err != nil && ctx.Err() == nil {
			p.logger.Warn("idempotency: push completed answers", "err", err, "dropped", len(batch))
			if conn != nil {
				conn.Close(context.Background())
				conn = nil
			}
			sleep(ctx, pushRetry)
		}
	}
}

// gather adds to batch what is queued within pushGather, up to pushBatch.
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

// encode signs answers for channel, leaving out those NOTIFY cannot carry:
// too large, or a scope or key JSON would not carry exactly.
func (p *pusher) encode(channel string, batch []*cached) []string {
	payloads := make([]string, 0, len(batch))
	for _, b := range batch {
		if !utf8.ValidString(b.scope) || !utf8.ValidString(b.key) {
			continue
		}
		msg, err := json.Marshal(pushMessage{
			From: p.id, Scope: b.scope, Key: b.key, OperationID: b.operationID,
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
	defer p.done.Done()
	first := true
	for ctx.Err() == nil {
		if err := p.listen(ctx, &first); err != nil && ctx.Err() == nil {
			p.logger.Warn("idempotency: listen for pushed answers", "err", err)
			sleep(ctx, pushRetry)
		}
	}
}

// listen puts each answer another instance pushes into the cache, until
// its connection fails or ctx ends.
func (p *pusher) listen(ctx context.Context, first *bool) error {
	conn, name, err := p.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	if *first {
		close(p.listening)
		*first = false
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if v, ok := p.decode(name, n.Payload); ok {
			p.answers.put(v)
		}
	}
}

// decode reads a payload pushed on channel, once its signature is
// checked; this instance's own come back too, and are ignored.
func (p *pusher) decode(channel, payload string) (*cached, bool) {
	msg, ok := p.verified(channel, payload)
	var m pushMessage
	if !ok || json.Unmarshal(msg, &m) != nil || m.From == p.id || len(m.Raw) != sha256.Size {
		return nil, false
	}
	k := IdempotencyKey{Scope: m.Scope, Key: m.Key, OperationID: m.OperationID, Method: m.Method, Route: m.Route, Fingerprint: m.Fingerprint, ExpiresAt: m.ExpiresAt}
	// Whatever the sender stored: never more headers than a replay sends.
	return answerOf(k, [sha256.Size]byte(m.Raw), m.Status, replayable(m.Headers), m.Body), true
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
