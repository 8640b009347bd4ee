package testkit

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"gorm.io/gorm"
)

// Locked is a transaction a test holds open on a connection of its own, so
// that a writer waits for it: on SQLite it holds the writer's one
// connection (BEGIN IMMEDIATE); on PostgreSQL, the rows its statements lock.
type Locked struct {
	conn    *sql.Conn
	waiting func() bool
}

// Lock begins the transaction on db and runs statements in it.
func Lock(t testing.TB, db *gorm.DB, statements ...string) *Locked {
	t.Helper()
	pool, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := &Locked{conn: conn}
	begin := "BEGIN"
	if db.Dialector.Name() != "postgres" {
		begin = "BEGIN IMMEDIATE"
		waits := pool.Stats().WaitCount
		l.waiting = func() bool { return pool.Stats().WaitCount > waits }
	} else {
		var pid int
		if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		l.waiting = func() bool {
			var n int64
			err := db.Raw("SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))", pid).Scan(&n).Error
			return err == nil && n > 0
		}
	}
	for _, s := range append([]string{begin}, statements...) {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() { l.End("ROLLBACK") })
	return l
}

// WaitUntilBlocking returns once a statement waits for the transaction.
func (l *Locked) WaitUntilBlocking(t testing.TB, what string) {
	t.Helper()
	WaitFor(t, what, l.waiting)
}

// End ends the transaction with end, COMMIT or ROLLBACK, and lets the
// connection go; once ended, it does nothing.
func (l *Locked) End(end string) error {
	if l.conn == nil {
		return nil
	}
	_, err := l.conn.ExecContext(context.Background(), end)
	if err != nil {
		_, _ = l.conn.ExecContext(context.Background(), "ROLLBACK") // the connection goes back to the pool with no transaction
	}
	_ = l.conn.Close()
	l.conn = nil
	return err
}

// WaitFor polls cond until it holds, for at most 10 s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}
