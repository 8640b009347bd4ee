package accounts

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/shop/shop/models"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
)

// passwordProblem is what is wrong with a new password, "" when nothing:
// the one rule of sign-up and of a password change (bcrypt reads 72 bytes).
func passwordProblem(password string) string {
	switch {
	case utf8.RuneCountInString(password) < 8:
		return "must be at least 8 characters"
	case len(password) > 72:
		return "must be at most 72 bytes"
	}
	return ""
}

// errWrongPassword refuses a change whose current password is not the user's.
var errWrongPassword = models.Invalid(models.FieldError{Field: "current_password", Message: "is not your current password"})

// PasswordChange is what a password change form sends, and where from.
type PasswordChange struct {
	Current, New string
	// Address is the client's: a wrong current password is a failed log-in
	// from there, so that a lifted cookie cannot guess the password for ever.
	Address  string
	Sessions Sessions // where the browser that made the change is signed in anew
}

// ChangePassword sets the user's password to change.New when change.Current
// is theirs (else EINVALID, and a failed log-in), ends all their sessions and
// bearer tokens, and returns a new session for the browser. tx is called after
// bcrypt, for every write: they commit as one, with no lock held through bcrypt.
func (a Accounts) ChangePassword(ctx context.Context, tx func() *gorm.DB, user models.User, change PasswordChange, now time.Time) (string, error) {
	if err := a.checkFailures(ctx, user.Email, change.Address); err != nil {
		return "", err
	}
	if compareHash([]byte(user.PasswordHash), []byte(change.Current)) != nil {
		if err := a.recordFailure(ctx, user.Email, change.Address); err != nil {
			return "", err
		}
		return "", errWrongPassword
	}
	if problem := passwordProblem(change.New); problem != "" {
		return "", models.Invalid(models.FieldError{Field: "new_password", Message: problem})
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(change.New), a.BcryptCost)
	if err != nil {
		return "", err
	}
	db := tx()
	ctx = db.Statement.Context // tx's own: it outlives a client that hung up, to commit as one
	// Fenced by the hash that was checked: a change that lost a race changes nothing.
	res := db.Model(&models.User{}).Where("id = ? AND password_hash = ?", user.ID, user.PasswordHash).Update("password_hash", string(hash))
	if res.Error != nil {
		return "", res.Error
	}
	if res.RowsAffected == 0 {
		return "", errWrongPassword
	}
	sessions := change.Sessions
	sessions.DB = db
	if err := sessions.EndAllOf(ctx, user.ID); err != nil {
		return "", err
	}
	if err := (Accounts{DB: db, Throttle: a.Throttle}).forgetFailures(ctx, user.Email, change.Address); err != nil {
		return "", err
	}
	if err := db.Model(&models.APIToken{}).Where("user_id = ? AND revoked_at IS NULL", user.ID).Update("revoked_at", now.UTC()).Error; err != nil {
		return "", err
	}
	token, _, err := sessions.Start(ctx, user.ID, now)
	return token, err
}
