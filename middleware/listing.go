package middleware

import (
	"context"
	"time"
)

// KeyPosition is where a page of a scope's keys ended: the creation time
// and id of its last key. The next page starts strictly after it.
type KeyPosition struct {
	CreatedAt time.Time
	ID        uint
}

// KeysPage lists up to limit of the scope's keys, newest first, from after
// p (from the newest when p is nil), without their stored answers; more
// says whether any follow.
func (m *Idempotency) KeysPage(ctx context.Context, scope string, p *KeyPosition, limit int) (keys []IdempotencyKey, more bool, err error) {
	keys, err = m.replays.withPending(func() ([]IdempotencyKey, error) {
		keys := []IdempotencyKey{}
		q := m.cfg.DB.WithContext(ctx).Omit("body", "headers").Where("scope = ?", scope)
		if p != nil {
			q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", p.CreatedAt, p.CreatedAt, p.ID)
		}
		err := q.Order("created_at DESC, id DESC").Limit(limit + 1).Find(&keys).Error
		return keys, err
	})
	if len(keys) > limit {
		return keys[:limit], true, err
	}
	return keys, false, err
}
