package database

// Group commit on SQLite: the writers already queue on one connection, so
// the transactions waiting in that queue share one COMMIT — one fsync —
// instead of taking one each. Each runs in a savepoint of its own inside the
// shared transaction: one that rolls back (a claim lost, a refusal, stock
// short) undoes only its own writes; one that commits releases its
// savepoint, and its Commit returns only once the shared COMMIT is on disk.
// Nothing is answered before it is durable, and a crash before the COMMIT
// loses only transactions whose Commit had not returned.

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// groupCommitter runs the writer's transactions in batches. Holding the
// token is the right to run on the open transaction; a transaction holds
// it from its begin to its commit or rollback, as it held the writer's one
// connection before. mu guards who holds it and who waits, so that passing
// it on and a waiter giving up cannot cross; the fields after mu are the
// token holder's.
type groupCommitter struct {
	writer *sql.DB
	max    int

	mu    sync.Mutex
	held  bool
	queue []chan struct{} // the waiters, first come first served

	tx    *sql.Tx // the open shared transaction, or nil
	batch *batch  // what the open transaction's members wait on
	seq   uint64  // savepoint names

	commits, operations atomic.Uint64
}

// batch is one shared transaction's outcome: done closes after its COMMIT
// (or its failure), err is then what every member's Commit returns.
type batch struct {
	done      chan struct{}
	err       error
	began     int // members begun in it, committed or not
	committed int // members whose savepoint was released
}

func newGroupCommitter(writer *sql.DB, max int) *groupCommitter {
	return &groupCommitter{writer: writer, max: max}
}

// begin waits for the token, opens the shared transaction if none is open,
// and begins a member in a savepoint of its own.
//
// The wait for the token and the wait for SQLite's write lock (held by
// another process) share one bound, sqliteBusyTimeout, as one write's
// wait did before the token: a queue must not make a write wait longer.
func (g *groupCommitter) begin(ctx context.Context) (*member, error) {
	deadline := time.Now().Add(sqliteBusyTimeout)
	if err := g.acquire(ctx, deadline); err != nil {
		return nil, err
	}
	if g.tx == nil {
		if err := g.open(deadline); err != nil {
			g.pass()
			return nil, err
		}
	}
	g.seq++
	m := &member{g: g, tx: g.tx, batch: g.batch, savepoint: "gc" + strconv.FormatUint(g.seq, 10), ctx: ctx}
	if _, err := g.tx.ExecContext(context.Background(), "SAVEPOINT "+m.savepoint); err != nil {
		g.fail(err)
		return nil, err
	}
	g.batch.began++
	// Under the member's lock: a context that has already ended runs the
	// rollback at once, on another goroutine, which must find stop set.
	m.mu.Lock()
	m.stop = context.AfterFunc(ctx, func() { _ = m.end(false) })
	m.mu.Unlock()
	return m, nil
}

// open begins the shared transaction by deadline: BEGIN IMMEDIATE waits
// for SQLite's write lock, in its busy handler, no longer. The transaction
// lives on no member's context, since one member's ending must not roll
// back the others.
func (g *groupCommitter) open(deadline time.Time) error {
	tx, err := startBy(context.Background(), deadline, func(ctx context.Context) (*sql.Tx, error) { return g.writer.BeginTx(ctx, nil) })
	if err != nil {
		return err
	}
	g.tx, g.batch = tx, &batch{done: make(chan struct{})}
	return nil
}

// acquire takes the token, waiting in line until deadline. A waiter that gives up leaves the line — or,
// if the token was passed to it meanwhile, passes it on (or commits) as a
// member would.
func (g *groupCommitter) acquire(ctx context.Context, deadline time.Time) error {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return nil
	}
	mine := make(chan struct{}, 1)
	g.queue = append(g.queue, mine)
	g.mu.Unlock()
	_, err := startBy(ctx, deadline, func(ctx context.Context) (struct{}, error) {
		select {
		case <-mine:
			return struct{}{}, nil
		case <-ctx.Done():
			return struct{}{}, ctx.Err()
		}
	})
	if err == nil {
		return nil
	}
	g.mu.Lock()
	select {
	case <-mine: // passed to it after all: it holds the token
		g.mu.Unlock()
		g.release()
	default:
		g.queue = slices.DeleteFunc(g.queue, func(c chan struct{}) bool { return c == mine })
		g.mu.Unlock()
	}
	return err
}

// waiters is how many wait for the token.
func (g *groupCommitter) waiters() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// release ends a member's turn: while others wait and the batch has room,
// the token passes on with the transaction open; otherwise the batch
// commits first. The choice and the passing are one step under mu, so that
// a waiter leaving the line in between cannot be handed an open batch.
func (g *groupCommitter) release() {
	for {
		g.mu.Lock()
		if g.tx != nil && (len(g.queue) == 0 || g.batch.began >= g.max) {
			g.mu.Unlock()
			g.finish(g.commit()) // holding the token, not mu: waiters line up meanwhile
			continue
		}
		g.passLocked()
		g.mu.Unlock()
		return
	}
}

// pass gives the token to the first waiter, or frees it, when no batch is
// open.
func (g *groupCommitter) pass() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.passLocked()
}

func (g *groupCommitter) passLocked() {
	if len(g.queue) == 0 {
		g.held = false
		return
	}
	next := g.queue[0]
	g.queue = g.queue[1:]
	next <- struct{}{}
}

// commit ends the shared transaction: COMMIT if a member committed in it,
// else ROLLBACK (nothing to keep, nothing to sync).
func (g *groupCommitter) commit() error {
	if g.batch.committed == 0 {
		return g.tx.Rollback()
	}
	beforeCommit(g.batch.committed)
	if err := g.tx.Commit(); err != nil {
		return err
	}
	g.commits.Add(1)
	g.operations.Add(uint64(g.batch.committed))
	return nil
}

// fail ends the shared transaction after a statement that should not fail
// did (a savepoint could not be made, released or rolled back to): the
// transaction may be gone, so every member of the batch fails. The token
// is released.
func (g *groupCommitter) fail(err error) {
	_ = g.tx.Rollback()
	g.finish(err)
	g.pass()
}

// finish tells the batch's members its outcome and closes the transaction.
func (g *groupCommitter) finish(err error) {
	g.batch.err = err
	close(g.batch.done)
	g.tx, g.batch = nil, nil
}

// member is one transaction as its caller sees it: a savepoint in the
// shared transaction. It is the gorm.ConnPool and gorm.TxCommitter that
// sqlitePools.BeginTx returns.
type member struct {
	g         *groupCommitter
	tx        *sql.Tx
	batch     *batch
	savepoint string
	ctx       context.Context
	stop      func() bool

	mu   sync.Mutex
	done bool
}

// Commit releases the member's savepoint and waits for the shared COMMIT:
// its error, if the batch failed, is the member's. A member whose context
// ended is rolled back instead, as database/sql does.
func (m *member) Commit() error { return m.end(true) }

// Rollback undoes the member's writes alone; the batch goes on.
func (m *member) Rollback() error { return m.end(false) }

func (m *member) end(commit bool) error {
	m.mu.Lock()
	if m.done {
		m.mu.Unlock()
		return m.check() // the context's end, if that is what ended it, as database/sql says
	}
	m.done = true
	m.stop()
	if err := m.ctx.Err(); commit && err != nil {
		_ = m.undo()
		m.mu.Unlock()
		return err
	}
	if !commit {
		err := m.undo()
		m.mu.Unlock()
		return err
	}
	b := m.batch
	if _, err := m.tx.ExecContext(context.Background(), "RELEASE "+m.savepoint); err != nil {
		m.g.fail(err)
		m.mu.Unlock()
		<-b.done
		return err
	}
	b.committed++
	m.g.release()
	m.mu.Unlock()
	<-b.done
	return b.err
}

// undo rolls the member's savepoint back and passes the token on.
func (m *member) undo() error {
	_, err := m.tx.ExecContext(context.Background(), "ROLLBACK TO "+m.savepoint)
	if err == nil {
		_, err = m.tx.ExecContext(context.Background(), "RELEASE "+m.savepoint)
	}
	if err != nil {
		m.g.fail(err)
		return err
	}
	m.g.release()
	return nil
}

// errMemberDone is what a statement on a member that has ended gets.
var errMemberDone = sql.ErrTxDone

// Statements run on the shared transaction without the member's
// cancellation: SQLite answers an interrupted write inside a transaction by
// rolling back the whole transaction, every member's writes with it. A
// member whose context ends is rolled back between statements instead.

func (m *member) check() error {
	if err := m.ctx.Err(); err != nil {
		return err // a client that left is told apart from a programming error
	}
	if m.done {
		return errMemberDone
	}
	return nil
}

func (m *member) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.tx.PrepareContext(context.WithoutCancel(ctx), query)
}

func (m *member) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.tx.ExecContext(context.WithoutCancel(ctx), query, args...)
}

func (m *member) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.tx.QueryContext(context.WithoutCancel(ctx), query, args...)
}

// QueryRowContext has no error of its own to return on an ended member:
// see endedRow.
func (m *member) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.check() != nil {
		return endedRow.QueryRowContext(ctx, query, args...)
	}
	return m.tx.QueryRowContext(context.WithoutCancel(ctx), query, args...)
}

// endedRow is the row a query on an ended member returns: one from a pool
// that is closed, whose Scan reports an error, since sql.Row cannot be made
// with an error of one's own. Nothing reaches the shared transaction, which
// may be another member's by then.
var endedRow = func() *sql.DB {
	db, _ := sql.Open("sqlite3", "")
	_ = db.Close()
	return db
}()
