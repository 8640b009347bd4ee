package database

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"gorm.io/gorm"
)

// A batch sends a transaction's inserts in one round trip: on PostgreSQL,
// each Create made through Batched is built, not sent (GORM's dry run),
// and send writes them all in one statement, a data-modifying CTE. What an
// INSERT returns (an id, a sequence number) is not read back: a batch is
// for rows nothing reads in the transaction. On SQLite, in the process,
// a statement is no round trip: Batched is the transaction itself.

// batchCallback collects the inserts of a batch (registered by Open).
const batchCallback = "database:batch"

type insertsKey struct{}

// insertBatch is the inserts built so far: their SQL, its placeholders "?", and
// their values.
type insertBatch struct {
	parts []string
	vars  []any
}

// placeholder is PostgreSQL's $n, as GORM writes every value it binds.
var placeholder = regexp.MustCompile(`\$[0-9]+`)

// collect records a dry-run INSERT of a batch.
func collect(db *gorm.DB) {
	b, ok := db.Statement.Context.Value(insertsKey{}).(*insertBatch)
	if !ok || !db.DryRun || db.Error != nil || db.Statement.SQL.Len() == 0 {
		return
	}
	b.parts = append(b.parts, placeholder.ReplaceAllString(db.Statement.SQL.String(), "?"))
	b.vars = append(b.vars, db.Statement.Vars...)
}

// Batched is tx for its inserts, and send, which writes them: in one
// statement on PostgreSQL, by the time send returns; on SQLite, each at
// once through tx (send has nothing left to do). Only Create may be called
// on the batch.
func Batched(tx *gorm.DB) (inserts *gorm.DB, send func() error) {
	if !IsPostgres(tx) || tx.Callback().Create().Get(batchCallback) == nil {
		return tx, func() error { return nil }
	}
	b := &insertBatch{}
	ctx := context.WithValue(tx.Statement.Context, insertsKey{}, b)
	return tx.Session(&gorm.Session{DryRun: true, Context: ctx}), func() error { return b.send(tx) }
}

// send writes the batch's inserts through tx: the last one the statement,
// the others its CTE.
func (b *insertBatch) send(tx *gorm.DB) error {
	if len(b.parts) == 0 {
		return nil
	}
	var sql strings.Builder
	last := len(b.parts) - 1
	for i, part := range b.parts[:last] {
		if i == 0 {
			sql.WriteString("WITH ")
		} else {
			sql.WriteString(", ")
		}
		fmt.Fprintf(&sql, "insert_%d AS (%s)", i, part)
	}
	if last > 0 {
		sql.WriteString(" ")
	}
	sql.WriteString(b.parts[last])
	b.parts = nil
	return tx.Exec(sql.String(), b.vars...).Error
}
