package database

import (
	"time"

	"gorm.io/gorm"
)

// Position is where a page of a newest-first listing ended: the creation
// time and id of its last row. The next page starts strictly after it, so
// rows inserted meanwhile (newer, hence before it) neither repeat nor shift
// what follows.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// After keeps the rows of a newest-first listing that come after p, when
// p is set.
func After(db *gorm.DB, p *Position) *gorm.DB {
	if p == nil {
		return db
	}
	return db.Where("created_at < ? OR (created_at = ? AND id < ?)", p.CreatedAt, p.CreatedAt, p.ID)
}

// Page lists up to limit rows of q, newest first, from after p; more says
// whether any follow. Every listing of the shop pages this one way.
func Page[T any](q *gorm.DB, p *Position, limit int) (rows []T, more bool, err error) {
	rows = []T{}
	err = After(q, p).Order("created_at DESC, id DESC").Limit(limit + 1).Find(&rows).Error
	if len(rows) > limit {
		return rows[:limit], true, err
	}
	return rows, false, err
}
