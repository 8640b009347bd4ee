package database

import (
	"time"

	"gorm.io/gorm"
)

// Position is where a page of a newest-first listing ended (its last row's time
// and id): the next starts strictly after, so newer rows neither repeat nor shift it.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// Page lists up to limit rows of q, newest first, after p when p is set;
// more says whether any follow. Every listing of the shop pages this way.
func Page[T any](q *gorm.DB, p *Position, limit int) (rows []T, more bool, err error) {
	if p != nil {
		q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", p.CreatedAt, p.CreatedAt, p.ID)
	}
	rows = []T{}
	err = q.Order("created_at DESC, id DESC").Limit(limit + 1).Find(&rows).Error
	if len(rows) > limit {
		return rows[:limit], true, err
	}
	return rows, false, err
}
