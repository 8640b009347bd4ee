package database

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"gorm.io/gorm"
)

// A batch sends a transaction's inserts in one statement: each Create
// through Batched is built, not sent (GORM's dry run), and send writes them
// at once, on PostgreSQL as one data-modifying CTE, on SQLite as one Exec of
// the INSERTs in turn (the driver runs each on its own arguments, in order,
// and stops at the first that fails). Nothing an INSERT returns is read back.

// batchCallback collects the inserts of a batch; unreturning drops their
// RETURNING on SQLite, whose Exec would step through it for nothing.
const (
	batchCallback = "database:batch"
	unreturning   = "database:batch_unreturning"
)

type insertsKey struct{}

// insertBatch is the inserts built so far: their SQL, with "?" placeholders, and their values.
type insertBatch struct {
	parts []string
	vars  []any
}

// registerBatch lets Batched collect db's inserts.
func registerBatch(db *gorm.DB) error {
	create := db.Callback().Create()
	if !IsPostgres(db) {
		if err := create.Before("gorm:create").Register(unreturning, unreturn); err != nil {
			return err
		}
	}
	return create.After("gorm:create").Before("gorm:save_after_associations").Register(batchCallback, collect)
}

// sqliteInsertClauses are SQLite's clauses of an INSERT but RETURNING.
var sqliteInsertClauses = []string{"INSERT", "VALUES", "ON CONFLICT"}

func unreturn(db *gorm.DB) {
	if _, ok := db.Statement.Context.Value(insertsKey{}).(*insertBatch); ok && db.DryRun {
		db.Statement.BuildClauses = sqliteInsertClauses
	}
}

// placeholder is PostgreSQL's $n, as GORM writes every value it binds.
var placeholder = regexp.MustCompile(`\$[0-9]+`)

// collect records a dry-run INSERT of a batch.
func collect(db *gorm.DB) {
	b, ok := db.Statement.Context.Value(insertsKey{}).(*insertBatch)
	if !ok || !db.DryRun || db.Error != nil || db.Statement.SQL.Len() == 0 {
		return
	}
	sql := db.Statement.SQL.String()
	if IsPostgres(db) {
		sql = placeholder.ReplaceAllString(sql, "?")
	}
	b.parts = append(b.parts, sql)
	b.vars = append(b.vars, db.Statement.Vars...)
}

// Batched is tx for its inserts (Create only), and send, which writes them
// in one statement. tx is a transaction: on SQLite, the INSERTs of one Exec
// are all or nothing only within one.
func Batched(tx *gorm.DB) (inserts *gorm.DB, send func() error) {
	if tx.Callback().Create().Get(batchCallback) == nil {
		return tx, func() error { return nil }
	}
	b := &insertBatch{}
	ctx := context.WithValue(tx.Statement.Context, insertsKey{}, b)
	return tx.Session(&gorm.Session{DryRun: true, Context: ctx}), func() error { return b.send(tx) }
}

// send writes the batch's inserts through tx.
func (b *insertBatch) send(tx *gorm.DB) error {
	if len(b.parts) == 0 {
		return nil
	}
	sql := b.parts[len(b.parts)-1]
	if IsPostgres(tx) {
		sql = withCTEs(b.parts)
	} else if len(b.parts) > 1 {
		sql = strings.Join(b.parts, ";\n")
	}
	b.parts = nil
	return tx.Exec(sql, b.vars...).Error
}

// withCTEs is PostgreSQL's one statement of parts: the last the statement,
// the others its CTEs.
func withCTEs(parts []string) string {
	last := len(parts) - 1
	if last == 0 {
		return parts[0]
	}
	ctes := make([]string, last)
	for i, part := range parts[:last] {
		ctes[i] = fmt.Sprintf("insert_%d AS (%s)", i, part)
	}
	return "WITH " + strings.Join(ctes, ", ") + " " + parts[last]
}
