package accounts

import (
	"context"
	"errors"
	"time"

	"github.com/shop/shop/models"
	"gorm.io/gorm"
)

// Session is a browser signed in as a user by a random 256-bit token, of
// which the server keeps only the SHA-256: a copy of the table signs no one in.
type Session struct {
	ID                    int64
	TokenHash, UserID     string
	CreatedAt, LastSeenAt time.Time
	ExpiresAt             time.Time // the absolute end, however busy the session is
}

// ErrSessionEnded: the token names no session that still works (never one,
// ended by a log-out or a password change, or run out).
var ErrSessionEnded = errors.New("the session has ended")

// Sessions starts, finds and ends browser sessions: one ends when ended, after
// Idle without a request, or MaxAge after it began. Times are kept in UTC.
type Sessions struct {
	DB           *gorm.DB
	Idle, MaxAge time.Duration
}

// touchEvery is how stale LastSeenAt may grow before a request writes it: a
// page view is a read but once a minute, so a session may end a minute early.
const touchEvery = time.Minute

// Start begins a session for the user and returns its token, which only the browser keeps.
func (s Sessions) Start(ctx context.Context, userID string, now time.Time) (string, Session, error) {
	token := newToken()
	now = now.UTC()
	session := Session{TokenHash: hashToken(token), UserID: userID, CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(s.MaxAge)}
	err := s.DB.WithContext(ctx).Create(&session).Error
	return token, session, err
}

// Lookup is the session of a token at now, or ErrSessionEnded. A session
// found run out is deleted on the way; one alive is touched (touchEvery).
func (s Sessions) Lookup(ctx context.Context, token string, now time.Time) (Session, error) {
	db := s.DB.WithContext(ctx)
	var session Session
	err := db.Where("token_hash = ?", hashToken(token)).Take(&session).Error
	if err := models.NotFoundAs(err, ErrSessionEnded); err != nil {
		return Session{}, err
	}
	now = now.UTC()
	if !now.Before(session.ExpiresAt) || now.Sub(session.LastSeenAt) >= s.Idle {
		if err := db.Delete(&Session{}, session.ID).Error; err != nil {
			return Session{}, err
		}
		return Session{}, ErrSessionEnded
	}
	if now.Sub(session.LastSeenAt) >= touchEvery {
		session.LastSeenAt = now
		if err := db.Model(&Session{}).Where("id = ?", session.ID).Update("last_seen_at", now).Error; err != nil {
			return Session{}, err
		}
	}
	return session, nil
}

// End ends the session with this id (log out); one already gone is no error.
func (s Sessions) End(ctx context.Context, id int64) error {
	return s.DB.WithContext(ctx).Delete(&Session{}, id).Error
}

func (s Sessions) EndAllOf(ctx context.Context, userID string) error {
	return s.DB.WithContext(ctx).Where("user_id = ?", userID).Delete(&Session{}).Error
}

// Sweep deletes the sessions that ran out by now, which Lookup would refuse
// anyway, and says how many.
func (s Sessions) Sweep(ctx context.Context, now time.Time) (int64, error) {
	now = now.UTC()
	res := s.DB.WithContext(ctx).Where("expires_at <= ? OR last_seen_at <= ?", now, now.Add(-s.Idle)).Delete(&Session{})
	return res.RowsAffected, res.Error
}
