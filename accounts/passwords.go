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
// the one rule of sign-up and of a password change. bcrypt reads at most
// 72 bytes, so a longer password would be cut short without a word.
func passwordProblem(password string) string {
	switch {
	case utf8.RuneCountInString(password) < 8:
		return "must be at least 8 characters"
	case len(password) > 72:
		return "must be at most 72 bytes"
	}
	return ""
}

// errWrongPassword refuses a password change whose current password is not
// the user's.
var errWrongPassword = models.Invalid(models.FieldError{Field: "current_password", Message: "is not your current password"})

// PasswordChange is what a password change form sends, and where from.
type PasswordChange struct {
	Current, New string
	// Address is the client's, for the Throttle: a wrong current password
	// counts as a failed log-in of the account from there, so that a
	// session alone (a lifted cookie) cannot guess the password for ever.
	Address string
	// Sessions is where the browser that made the change is signed in anew.
	Sessions Sessions
}

// ChangePassword sets the user's password to change.New when
// change.Current is theirs, and ends what the old password let in: every
// session of the user, the one that made the change included (its cookie
// may be a thief's copy), and every bearer token of theirs (revoked at
// now). It returns the token of a new session for the browser that made
// the change. The checks and the bcrypt work come first; only then is tx
// called, and every write of the change goes through it, so that they
// commit together or not at all and the transaction (SQLite's write lock)
// is not held through bcrypt. A wrong current password, or one changed
// meanwhile by another change, is an EINVALID error naming
// current_password; a bad new one names new_password. With a Throttle, a
// wrong current password is a failed log-in, and too many of them get a
// *ThrottledError before any bcrypt work.
//
// A revoked token is refused at once by an instance that has not looked it
// up lately; one that has (this one included) trusts its cached lookup for
// up to its TokenCache TTL, as with any revocation made elsewhere.
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
	// The writes run in tx's own context: the caller's may end with a client
	// that hung up, and tx's outlives it to commit or roll back as one.
	db := tx()
	ctx = db.Statement.Context
	// Fenced by the hash that was checked: a change that lost a race with
	// another changes nothing.
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
