package database

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"gorm.io/gorm"
)

// A batch sends a transaction's inserts in one statement: each Create
// through Chained is built, not sent (GORM's dry run), and send writes them
// at once, on PostgreSQL as one data-modifying CTE, on SQLite as one Exec of
// the INSERTs in turn (the driver runs each on its own arguments, in order,
// and stops at the first that fails). Nothing an INSERT returns is read back.
// Statements that change a row may follow the inserts (Chained's steps).

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

// A Step is a statement sent after a batch's inserts: an UPDATE of one row
// at most (by its key) whose SQL ends in its WHERE clause, an AND to which
// more can be added, and its values (placeholders "?", or GORM's "$n").
type Step struct {
	SQL  string
	Vars []any
}

// Chained is tx for its inserts (Create only), and send, which writes them
// in one statement, then runs steps, each only once the one before it
// changed its row, and returns how many did (a prefix of steps): on
// PostgreSQL all in that one statement, which locks the steps' rows in
// their order; on SQLite one Exec of the inserts, then a statement a step.
// tx is a transaction: on SQLite, the INSERTs of one Exec are all or
// nothing only within one.
func Chained(tx *gorm.DB) (inserts *gorm.DB, send func(steps ...Step) (changed int, err error)) {
	if tx.Callback().Create().Get(batchCallback) == nil {
		return tx, func(steps ...Step) (int, error) { return stepwise(tx, steps) }
	}
	b := &insertBatch{}
	ctx := context.WithValue(tx.Statement.Context, insertsKey{}, b)
	return tx.Session(&gorm.Session{DryRun: true, Context: ctx}), func(steps ...Step) (int, error) { return b.send(tx, steps) }
}

// send writes the batch's inserts, then steps, through tx.
func (b *insertBatch) send(tx *gorm.DB, steps []Step) (changed int, err error) {
	parts, vars := b.parts, b.vars
	b.parts, b.vars = nil, nil
	switch {
	case IsPostgres(tx) && len(steps) > 0:
		sql, vars := chainedCTEs(parts, vars, steps)
		// Find, not Scan: GORM's Scan renders every statement with its values
		// for a logger of its own (regexps over the SQL, 13 % of an order's CPU).
		// Find's errors, the driver's, are translated as Exec's are (AddError).
		err = tx.Raw(sql, vars...).Find(&changed).Error
		return changed, err
	case IsPostgres(tx) && len(parts) > 0:
		err = tx.Exec(withCTEs(parts), vars...).Error
	case len(parts) > 0:
		err = tx.Exec(strings.Join(parts, ";\n"), vars...).Error
	}
	if err != nil {
		return 0, err
	}
	return stepwise(tx, steps)
}

// stepwise runs steps in turn, each a statement, until one changes no row.
func stepwise(tx *gorm.DB, steps []Step) (int, error) {
	for i, s := range steps {
		res := tx.Exec(placeholder.ReplaceAllString(s.SQL, "?"), s.Vars...)
		if res.Error != nil || res.RowsAffected != 1 {
			return i, res.Error
		}
	}
	return len(steps), nil
}

// chainedCTEs is PostgreSQL's one statement of inserts then steps, each step
// a CTE that finds its row only once the one before it returned its own (its
// WHERE waits for that row, so the rows are locked in turn), and the
// statement the count of those that did. The inserts, which nothing reads,
// run as the statement ends.
func chainedCTEs(parts []string, vars []any, steps []Step) (string, []any) {
	ctes := make([]string, 0, len(parts)+len(steps))
	for i, part := range parts {
		ctes = append(ctes, fmt.Sprintf("insert_%d AS (%s)", i, part))
	}
	counts := make([]string, len(steps))
	for i, s := range steps {
		sql := placeholder.ReplaceAllString(s.SQL, "?")
		if i > 0 {
			sql += fmt.Sprintf(" AND EXISTS (SELECT FROM step_%d)", i-1)
		}
		ctes = append(ctes, fmt.Sprintf("step_%d AS (%s RETURNING 1)", i, sql))
		counts[i] = fmt.Sprintf("(SELECT count(*) FROM step_%d)", i)
		vars = append(vars, s.Vars...)
	}
	return "WITH " + strings.Join(ctes, ", ") + " SELECT " + strings.Join(counts, " + "), vars
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
