package accounts

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// AddressMinute counts the credential requests (sign-ups and log-ins) of a
// client address in one minute, in the database, so that every instance
// adds to one count.
type AddressMinute struct {
	Address string `gorm:"primaryKey;size:64"`
	Minute  int64  `gorm:"primaryKey;index"` // Unix time / 60
	Hits    int    `gorm:"not null"`
}

// AddressLimit allows PerMinute credential requests per address and
// calendar minute, across all instances.
type AddressLimit struct {
	DB        *gorm.DB
	PerMinute int
	Now       func() time.Time
}

// Take counts a request from address, in one statement that every
// instance's requests go through one at a time (an upsert of the minute's
// row), and refuses it past the limit until the next minute. The first
// request of a minute forgets the minutes before it, of every address.
func (l AddressLimit) Take(ctx context.Context, address string) error {
	now := l.Now().UTC()
	minute := now.Unix() / 60
	db := l.DB.WithContext(ctx)
	var hits int
	err := db.Raw(`INSERT INTO address_minutes (address, minute, hits) VALUES (?, ?, 1)
		ON CONFLICT (address, minute) DO UPDATE SET hits = address_minutes.hits + 1 RETURNING hits`, address, minute).Scan(&hits).Error
	if err != nil {
		return err
	}
	if hits == 1 {
		if err := db.Where("minute < ?", minute).Delete(&AddressMinute{}).Error; err != nil {
			return err
		}
	}
	if hits <= l.PerMinute {
		return nil
	}
	return Throttled("Too many sign-ups or log-ins from your address", time.Unix((minute+1)*60, 0).Sub(now))
}
