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
// Transactions and writes go to the writer: one connection, so writers
// queue in this process instead of sleeping in SQLite's busy handler (steps
// of up to 100 ms). SELECTs outside a transaction go to the query-only
// readers, which WAL mode lets read beside the writer.
type sqlitePools struct {
	writer, readers *sql.DB
	group           *groupCommitter // the writer's transactions, in batches
}

// isSelect reports whether query is a plain SELECT: one that cannot write.
// A WITH may hide an INSERT, so it goes to the writer.
func isSelect(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	return len(q) >= 6 && strings.EqualFold(q[:6], "select")
}

// onPool runs a statement outside a transaction on its pool: a write must
// start within sqliteBusyTimeout.
func onPool[T any](p *sqlitePools, ctx context.Context, query string, run func(*sql.DB, context.Context) (T, error)) (T, error) {
	if isSelect(query) {
		return run(p.readers, ctx)
	}
	return startBy(ctx, time.Now().Add(sqliteBusyTimeout), func(ctx context.Context) (T, error) { return run(p.writer, ctx) })
}

func (p *sqlitePools) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if isSelect(query) {
		return p.readers.PrepareContext(ctx, query)
	}
	return p.writer.PrepareContext(ctx, query)
}

func (p *sqlitePools) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return onPool(p, ctx, query, func(pool *sql.DB, ctx context.Context) (sql.Result, error) {
		return pool.ExecContext(ctx, query, args...)
	})
}

func (p *sqlitePools) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return onPool(p, ctx, query, func(pool *sql.DB, ctx context.Context) (*sql.Rows, error) {
		return pool.QueryContext(ctx, query, args...)
	})
}

func (p *sqlitePools) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	row, _ := onPool(p, ctx, query, func(pool *sql.DB, ctx context.Context) (*sql.Row, error) {
		return pool.QueryRowContext(ctx, query, args...), nil
	})
	return row
}

// BeginTx begins a member of the group committer's batch on the writer, with
// SQLite's default options whatever opts says: a savepoint has none.
func (p *sqlitePools) BeginTx(ctx context.Context, _ *sql.TxOptions) (gorm.ConnPool, error) {
	m, err := p.group.begin(ctx)
	if err != nil {
		return nil, err // not a nil *member in a non-nil interface
	}
	return m, nil
}

// sqliteBusyTimeout is how long a write waits for SQLite's write lock: in
// this process's queue and in SQLite's busy handler, together.
const sqliteBusyTimeout = 15 * time.Second

// startBy starts a write (a statement, or a transaction) on a context that ends
// if it has not started by deadline; once started, it lives on ctx alone.
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
// statement.
func (p *sqlitePools) GetDBConn() (*sql.DB, error) { return p.writer, nil }

func (p *sqlitePools) Close() error { return errors.Join(p.readers.Close(), p.writer.Close()) }
