package accounts

import (
	"context"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm"
)

// LoginFailure is one failed log-in of an account (its lower-cased email)
// from one client address, in the database: every instance sees one count.
type LoginFailure struct {
	ID      uint      `gorm:"primaryKey"`
	Email   string    `gorm:"size:254;not null;index:idx_login_failures_account_from,priority:1"`
	Address string    `gorm:"size:64;not null;default:'';index:idx_login_failures_account_from,priority:2"`
	At      time.Time `gorm:"not null;index:idx_login_failures_account_from,priority:3;index"`
}

// LoginThrottle slows, then refuses, the log-ins to an account from an
// address that failed too often within Window — from that address only, so
// that who knows an email cannot lock its owner out (OWASP). Half of Failures
// pass, each after doubles the wait (1 s, 2 s…); at Failures, refused until
// the oldest leaves the window. Unknown emails count alike.
type LoginThrottle struct {
	Failures int
	Window   time.Duration
	Now      func() time.Time
}

// ThrottledError: too many attempts; the client may try again after RetryAfter.
type ThrottledError struct {
	Message    string
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string { return e.Message }

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1.
func (e *ThrottledError) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// Throttled is a refusal for what, to be tried again after wait; its
// message gives the same whole seconds as its Retry-After.
func Throttled(what string, wait time.Duration) *ThrottledError {
	e := &ThrottledError{RetryAfter: wait}
	unit := "seconds"
	if e.RetryAfterSeconds() == 1 {
		unit = "second"
	}
	e.Message = fmt.Sprintf("%s: try again in %d %s.", what, e.RetryAfterSeconds(), unit)
	return e
}

// checkFailures slows down or refuses a log-in to an account from an address
// that failed too often; a refusal is no failure, so it does not extend itself.
func (a Accounts) checkFailures(ctx context.Context, email, address string) error {
	t := a.Throttle
	if t == nil {
		return nil
	}
	now := t.Now().UTC()
	var recent []LoginFailure
	err := a.DB.WithContext(ctx).Where("email = ? AND address = ? AND at > ?", email, address, now.Add(-t.Window)).
		Order("at DESC").Limit(t.Failures).Find(&recent).Error
	if err != nil {
		return err
	}
	if wait := t.wait(recent, now); wait > 0 {
		return Throttled("Too many failed log-ins for this account from your address", wait)
	}
	return nil
}

// wait is how long an address waits for its next try, after its recent failures (newest first).
func (t *LoginThrottle) wait(recent []LoginFailure, now time.Time) time.Duration {
	n, free := len(recent), t.Failures/2
	switch {
	case n >= t.Failures:
		return recent[n-1].At.Add(t.Window).Sub(now)
	case n > free:
		return recent[0].At.Add(time.Second << (n - free - 1)).Sub(now)
	}
	return 0
}

// recordFailure counts a failed log-in, and forgets the failures of every
// account that have left the window.
func (a Accounts) recordFailure(ctx context.Context, email, address string) error {
	t := a.Throttle
	if t == nil {
		return nil
	}
	now := t.Now().UTC()
	db := a.DB.WithContext(ctx)
	if err := db.Where("at <= ?", now.Add(-t.Window)).Delete(&LoginFailure{}).Error; err != nil {
		return err
	}
	return db.Create(&LoginFailure{Email: email, Address: address, At: now}).Error
}

// forgetFailures clears an account's count from an address once it logs in from there.
func (a Accounts) forgetFailures(ctx context.Context, email, address string) error {
	if a.Throttle == nil {
		return nil
	}
	return a.DB.WithContext(ctx).Where("email = ? AND address = ?", email, address).Delete(&LoginFailure{}).Error
}

// AddressMinute counts the credential requests (sign-ups and log-ins) of a
// client address in one minute, in the database: every instance adds to one count.
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

// Take counts a request from address in one upsert, and refuses it past the
// limit until the next minute. A minute's first request forgets the minutes before.
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
