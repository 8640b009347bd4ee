package models

import (
	"context"
	"fmt"
	"math"
	"time"
)

// LoginFailure is one failed log-in of an account, by its lower-cased
// email. Counted in the database, so that every instance sees one count.
type LoginFailure struct {
	ID    uint      `gorm:"primaryKey"`
	Email string    `gorm:"size:254;not null;index:idx_login_failures_email_at,priority:1"`
	At    time.Time `gorm:"not null;index:idx_login_failures_email_at,priority:2;index"`
}

// LoginThrottle refuses log-ins to an account after Failures failed ones
// within Window, until the oldest of them is Window old. Unknown emails
// are counted alike, so a refusal tells nothing about which accounts exist.
type LoginThrottle struct {
	Failures int
	Window   time.Duration
	Now      func() time.Time
}

// ThrottledError: too many attempts; the client may try again after
// RetryAfter.
type ThrottledError struct {
	Message    string
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string { return e.Message }

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1.
func (e *ThrottledError) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// checkFailures refuses a log-in to an account that failed too often
// within the window. A refused log-in is not a failure: it does not extend
// the refusal.
func (a Accounts) checkFailures(ctx context.Context, email string) error {
	t := a.Throttle
	if t == nil {
		return nil
	}
	now := t.Now().UTC()
	var recent []LoginFailure
	err := a.DB.WithContext(ctx).Where("email = ? AND at > ?", email, now.Add(-t.Window)).
		Order("at DESC").Limit(t.Failures).Find(&recent).Error
	if err != nil || len(recent) < t.Failures {
		return err
	}
	// Allowed again once the oldest of the last Failures leaves the window.
	wait := recent[len(recent)-1].At.Add(t.Window).Sub(now)
	return &ThrottledError{
		Message:    fmt.Sprintf("Too many failed log-ins for this account: try again in %s.", wait.Round(time.Second)),
		RetryAfter: wait,
	}
}

// recordFailure counts a failed log-in, and forgets failures that have
// left the window, of every account.
func (a Accounts) recordFailure(ctx context.Context, email string) error {
	t := a.Throttle
	if t == nil {
		return nil
	}
	now := t.Now().UTC()
	db := a.DB.WithContext(ctx)
	if err := db.Where("at <= ?", now.Add(-t.Window)).Delete(&LoginFailure{}).Error; err != nil {
		return err
	}
	return db.Create(&LoginFailure{Email: email, At: now}).Error
}

// forgetFailures clears an account's count once it logs in.
func (a Accounts) forgetFailures(ctx context.Context, email string) error {
	if a.Throttle == nil {
		return nil
	}
	return a.DB.WithContext(ctx).Where("email = ?", email).Delete(&LoginFailure{}).Error
}
