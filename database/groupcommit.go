package database

// Group commit on SQLite: the transactions queued for the one writer share
// one COMMIT (one fsync), each in a savepoint of its own. A Commit returns
// only once the shared COMMIT is on disk: nothing is answered before.

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// groupCommitter runs the writer's transactions in batches. The token, the
// right to run on the open transaction, is held from a member's begin to
// its end; mu guards held and queue, the token holder the rest.
type groupCommitter struct {
	writer *sql.DB
	max    int

	mu    sync.Mutex
	held  bool
	queue []chan struct{} // the waiters, first come first served

	tx    *sql.Tx // the open shared transaction, or nil
	batch *batch
	seq   uint64

	commits, operations atomic.Uint64
}

// batch is one shared transaction: done closes after its COMMIT (or its
// failure), and err is then every member's Commit's.
type batch struct {
	done      chan struct{}
	err       error
	end       func() // ends the shared transaction's context, once it is over
	began     int    // members begun in it
	committed int    // members whose savepoint was released
}

// begin waits for the token, opens the shared transaction if none is, and
// begins a member in a savepoint, all within sqliteBusyTimeout, as a write would.
func (g *groupCommitter) begin(ctx context.Context) (*member, error) {
	deadline := time.Now().Add(sqliteBusyTimeout)
	if err := g.acquire(ctx, deadline); err != nil {
		return nil, err
	}
	if g.tx == nil {
		tx, end, err := g.open(ctx, deadline)
		if err != nil {
			g.pass()
			return nil, err
		}
		g.tx, g.batch = tx, &batch{done: make(chan struct{}), end: end}
	}
	g.seq++
	m := &member{g: g, tx: g.tx, batch: g.batch, savepoint: "gc" + strconv.FormatUint(g.seq, 10), ctx: ctx}
	if _, err := g.tx.ExecContext(context.Background(), "SAVEPOINT "+m.savepoint); err != nil {
		g.fail(err)
		return nil, err
	}
	g.batch.began++
	// Locked: a context already ended runs the rollback at once, and it must find stop set.
	m.mu.Lock()
	m.stop = context.AfterFunc(ctx, func() { _ = m.end(false) })
	m.mu.Unlock()
	return m, nil
}

// open begins the shared transaction on a context of its own, not the member's: one
// member's end must not roll back the others. ctx cuts off only the wait to begin, for the
// writer's connection (SQLite's busy handler, while another process writes, does not heed
// it); end ends the transaction's context.
func (g *groupCommitter) open(ctx context.Context, deadline time.Time) (tx *sql.Tx, end func(), err error) {
	own, end := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, end)
	tx, err = startBy(own, deadline, func(ctx context.Context) (*sql.Tx, error) {
		return g.writer.BeginTx(ctx, nil)
	})
	if !stop() { // ctx ended meanwhile: a transaction begun is on an ended context
		if err == nil {
			_ = tx.Rollback()
		}
		err = ctx.Err() // its own error (a deadline is not a client gone), not own's cancellation
	}
	if err != nil {
		end()
		return nil, nil, err
	}
	return tx, end, nil
}

// acquire takes the token, waiting in line until deadline. A waiter that gives
// up leaves the line, or passes on the token if it reached it meanwhile.
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
	case <-mine:
		g.mu.Unlock()
		g.release()
	default:
		g.queue = slices.DeleteFunc(g.queue, func(c chan struct{}) bool { return c == mine })
		g.mu.Unlock()
	}
	return err
}

// release ends a member's turn: the token passes on with the transaction open
// while others wait and the batch has room, or the batch commits first. Both
// are one step under mu: a waiter leaving the line is never handed an open batch.
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

// pass gives the token to the first waiter, or frees it.
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

// commit ends the shared transaction: ROLLBACK if no member committed.
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

// fail ends the shared transaction after a savepoint statement failed: the
// transaction may be gone, so every member of the batch fails with err.
func (g *groupCommitter) fail(err error) {
	_ = g.tx.Rollback()
	g.finish(err)
	g.pass()
}

func (g *groupCommitter) finish(err error) {
	g.batch.end()
	g.batch.err = err
	close(g.batch.done)
	g.tx, g.batch = nil, nil
}

// member is one transaction as its caller sees it (the gorm.ConnPool and
// gorm.TxCommitter of sqlitePools.BeginTx): a savepoint in the shared one.
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

// Commit releases the member's savepoint and returns the shared COMMIT's
// outcome; a member whose context ended is rolled back, as database/sql does.
func (m *member) Commit() error { return m.end(true) }

// Rollback undoes the member's writes alone; the batch goes on.
func (m *member) Rollback() error { return m.end(false) }

func (m *member) end(commit bool) error {
	m.mu.Lock()
	if m.done {
		m.mu.Unlock()
		return m.check()
	}
	m.done = true
	m.stop()
	if err := m.ctx.Err(); !commit || err != nil {
		undone := m.undo()
		m.mu.Unlock()
		if commit {
			return err
		}
		return undone
	}
	b := m.batch
	if _, err := m.tx.ExecContext(context.Background(), "RELEASE "+m.savepoint); err != nil {
		m.g.fail(err) // b.err is err
	} else {
		b.committed++
		m.g.release()
	}
	m.mu.Unlock()
	<-b.done
	return b.err
}

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

var errMemberDone = sql.ErrTxDone

// check tells a client that left (the context's end) from a programming
// error (a statement on a member that has ended).
func (m *member) check() error {
	if err := m.ctx.Err(); err != nil {
		return err
	}
	if m.done {
		return errMemberDone
	}
	return nil
}

// run runs a statement on the shared transaction without the member's
// cancellation (SQLite rolls back the whole transaction on an interrupt): a
// member whose context ends is rolled back between statements instead.
func run[T any](m *member, ctx context.Context, statement func(ctx context.Context) (T, error)) (T, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(); err != nil {
		var none T
		return none, err
	}
	return statement(context.WithoutCancel(ctx))
}

func (m *member) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return run(m, ctx, func(ctx context.Context) (*sql.Stmt, error) { return m.tx.PrepareContext(ctx, query) })
}

func (m *member) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return run(m, ctx, func(ctx context.Context) (sql.Result, error) { return m.tx.ExecContext(ctx, query, args...) })
}

func (m *member) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return run(m, ctx, func(ctx context.Context) (*sql.Rows, error) { return m.tx.QueryContext(ctx, query, args...) })
}

// QueryRowContext on an ended member returns a closed pool's row, whose Scan
// fails, so that nothing reaches the shared transaction, maybe another member's.
func (m *member) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	row, err := run(m, ctx, func(ctx context.Context) (*sql.Row, error) { return m.tx.QueryRowContext(ctx, query, args...), nil })
	if err != nil {
		return endedRow.QueryRowContext(ctx, query, args...)
	}
	return row
}

var endedRow = func() *sql.DB {
	db, _ := sql.Open("sqlite3", "")
	_ = db.Close()
	return db
}()
