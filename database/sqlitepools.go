package database

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// sqlitePools is an SQLite database as two connection pools over one file.
// Every transaction, and every statement outside one that is not a SELECT,
// goes to the writer: one connection, so that writers queue in this
// process, in database/sql's wait for it, instead of sleeping in SQLite's
// busy handler (which sleeps in steps of up to 100 ms, and made a request
// nobody else held wait seconds for the write lock). SELECTs outside a
// transaction go to the readers, which WAL mode lets read beside the
// writer. The readers are query-only: a write sent there fails at once
// instead of waiting. Other processes on the same file still meet this one
// at SQLite's lock, in the busy handler.
type sqlitePools struct {
	writer, readers *sql.DB
	group           *groupCommitter // the writer's transactions, in batches
}

// on is the pool a statement outside a transaction runs on.
func (p *sqlitePools) on(query string) *sql.DB {
	if isSelect(query) {
		return p.readers
	}
	return p.writer
}

// isSelect reports whether query is a plain SELECT: one that cannot write.
// A WITH may hide an INSERT, so it goes to the writer with the rest.
func isSelect(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	return len(q) >= 6 && strings.EqualFold(q[:6], "select")
}

func (p *sqlitePools) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.on(query).PrepareContext(ctx, query)
}

func (p *sqlitePools) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	pool := p.on(query)
	if pool == p.readers {
		return pool.ExecContext(ctx, query, args...)
	}
	return startWithin(ctx, func(ctx context.Context) (sql.Result, error) { return pool.ExecContext(ctx, query, args...) })
}

func (p *sqlitePools) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	pool := p.on(query)
	if pool == p.readers {
		return pool.QueryContext(ctx, query, args...)
	}
	return startWithin(ctx, func(ctx context.Context) (*sql.Rows, error) { return pool.QueryContext(ctx, query, args...) })
}

func (p *sqlitePools) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	pool := p.on(query)
	if pool == p.readers {
		return pool.QueryRowContext(ctx, query, args...)
	}
	row, _ := startWithin(ctx, func(ctx context.Context) (*sql.Row, error) { return pool.QueryRowContext(ctx, query, args...), nil })
	return row
}

// BeginTx begins on the writer: SQLite transactions here begin IMMEDIATE,
// taking the write lock, so each one waits its turn — for the group
// committer's token (groupcommit.go), whose batches share a COMMIT. The
// options are SQLite's defaults whatever opts says: a savepoint has none.
func (p *sqlitePools) BeginTx(ctx context.Context, _ *sql.TxOptions) (gorm.ConnPool, error) {
	m, err := p.group.begin(ctx)
	if err != nil {
		return nil, err // not a nil *member in a non-nil interface
	}
	return m, nil
}

// sqliteBusyTimeout is how long a write waits for SQLite's write lock: in
// this process's queue for the writer and in SQLite's busy handler (held by
// another process), together. Each connection used to wait this long on its
// own; a queue must not make a write behind others wait longer.
const sqliteBusyTimeout = 15 * time.Second

// startWithin starts a write — a statement, or a transaction — on a context
// that ends if it has not started within sqliteBusyTimeout. Once started,
// the write lives on ctx alone: a transaction or rows outlast the start.
func startWithin[T any](ctx context.Context, start func(context.Context) (T, error)) (T, error) {
	return startBy(ctx, time.Now().Add(sqliteBusyTimeout), start)
}

// startBy is startWithin with the bound given as a deadline.
func startBy[T any](ctx context.Context, deadline time.Time, start func(context.Context) (T, error)) (T, error) {
	bounded, cancel := context.WithCancel(ctx)
	var settled atomic.Bool
	timer := time.AfterFunc(time.Until(deadline), func() {
		if settled.CompareAndSwap(false, true) {
			cancel()
		}
	})
	v, err := start(bounded)
	if settled.CompareAndSwap(false, true) {
		timer.Stop()
	}
	return v, err
}

// GetDBConn is the pool gorm's DB() returns: the writer, which answers any
// statement. Close closes both.
func (p *sqlitePools) GetDBConn() (*sql.DB, error) { return p.writer, nil }

// Close closes both pools.
func (p *sqlitePools) Close() error { return errors.Join(p.readers.Close(), p.writer.Close()) }
