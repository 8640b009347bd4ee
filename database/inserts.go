package database

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"gorm.io/gorm"
)

// A batch sends a transaction's inserts in one round trip on PostgreSQL: each
// Create through Batched is built, not sent (GORM's dry run), and send writes
// them as one data-modifying CTE; nothing an INSERT returns is read back.

// batchCallback collects the inserts of a batch (registered by Open).
const batchCallback = "database:batch"

type insertsKey struct{}

// insertBatch is the inserts built so far: their SQL, with "?" placeholders, and their values.
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

// Batched is tx for its inserts (Create only), and send, which writes them in
// one statement on PostgreSQL; on SQLite each goes at once and send does nothing.
func Batched(tx *gorm.DB) (inserts *gorm.DB, send func() error) {
	if !IsPostgres(tx) || tx.Callback().Create().Get(batchCallback) == nil {
		return tx, func() error { return nil }
	}
	b := &insertBatch{}
	ctx := context.WithValue(tx.Statement.Context, insertsKey{}, b)
	return tx.Session(&gorm.Session{DryRun: true, Context: ctx}), func() error { return b.send(tx) }
}

// send writes the batch's inserts through tx: the last one the statement,
// the others its CTEs.
func (b *insertBatch) send(tx *gorm.DB) error {
	if len(b.parts) == 0 {
		return nil
	}
	last := len(b.parts) - 1
	sql := b.parts[last]
	if last > 0 {
		ctes := make([]string, last)
		for i, part := range b.parts[:last] {
			ctes[i] = fmt.Sprintf("insert_%d AS (%s)", i, part)
		}
		sql = "WITH " + strings.Join(ctes, ", ") + " " + sql
	}
	b.parts = nil
	return tx.Exec(sql, b.vars...).Error
}
