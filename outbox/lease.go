package outbox

import (
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Lease is a row's "held by whom, until when", in two of its columns: a
// consumer's lease of its events (the relay's), a delivery's claim by one
// webhook sender. The rule is written here once: a holder may take the
// lease when nobody holds it, when it holds it already, or when its time
// is up (until at or before now); taking it is one conditional UPDATE, so
// that two holders never both take it.
type Lease struct {
	Holder, Until string // the columns
}

// Free is the condition, in SQL, under which holder may take the lease at now.
func (l Lease) Free(holder string, now time.Time) clause.Expr {
	return gorm.Expr("("+l.Holder+" IS NULL OR "+l.Holder+" = ? OR "+l.Until+" <= ?)", holder, now)
}

// Take gives holder, until until, the leases of the rows q selects (a
// model and its conditions) that are free at now, and reports how many.
func (l Lease) Take(q *gorm.DB, holder string, now, until time.Time) (int64, error) {
	res := q.Where(l.Free(holder, now)).Updates(map[string]any{l.Holder: holder, l.Until: until})
	return res.RowsAffected, res.Error
}
