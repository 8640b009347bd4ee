// Package accounts keeps who may use the shop: users and their passwords,
// bearer tokens and browser sessions, roles, and the throttles on log-ins.
package accounts

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/shop/shop/models"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
)

// Accounts signs users up and in. Make it with NewAccounts to log users in.
type Accounts struct {
	DB         *gorm.DB
	BcryptCost int
	Throttle   *LoginThrottle // nil: no log-in is refused for failing too often
	Tokens     *TokenCache    // nil: every bearer-token lookup reads the database
	// dummyHash, made at start-up at BcryptCost, is what a log-in with an
	// unknown email is compared with: every log-in costs one comparison.
	dummyHash []byte
}

// NewAccounts makes the accounts service and its dummy hash.
func NewAccounts(db *gorm.DB, bcryptCost int) (Accounts, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(rand.Text()), bcryptCost)
	return Accounts{DB: db, BcryptCost: bcryptCost, dummyHash: hash}, err
}

// compareHash is a variable so that a test sees which hash a log-in was compared with.
var compareHash = bcrypt.CompareHashAndPassword

// badEmail names the email field of a refused sign-up or log-in.
var badEmail = models.FieldError{Field: "email", Message: "must be a valid email address"}

// normalEmail is email lower-cased and trimmed; false when it is not UTF-8
// (lower-casing would turn different invalid bytes into one U+FFFD, so one
// account) or holds U+FFFD (encoding/json's stand-in for invalid bytes).
func normalEmail(email string) (string, bool) {
	if !utf8.ValidString(email) || strings.ContainsRune(email, utf8.RuneError) {
		return "", false
	}
	return strings.ToLower(strings.TrimSpace(email)), true
}

// SignUp creates a user with a lower-cased email and a bcrypt password hash.
func (a Accounts) SignUp(ctx context.Context, email, password string) (models.User, error) {
	email, ok := normalEmail(email)
	var fields []models.FieldError
	if addr, err := mail.ParseAddress(email); !ok || err != nil || addr.Address != email || len(email) > 254 {
		fields = append(fields, badEmail)
	}
	if problem := passwordProblem(password); problem != "" {
		fields = append(fields, models.FieldError{Field: "password", Message: problem})
	}
	if fields != nil {
		return models.User{}, models.Invalid(fields...)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), a.BcryptCost)
	if err != nil {
		return models.User{}, err
	}
	user := models.User{ID: uuid.NewString(), Email: email, PasswordHash: string(hash)}
	err = a.DB.WithContext(ctx).Create(&user).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return models.User{}, models.ErrEmailTaken
	}
	return user, err
}

// LogIn checks an email and password sent from a client address: EINVALID
// for an email not UTF-8, before anything is read or counted; a
// *ThrottledError, before any bcrypt work, once the Throttle says so.
func (a Accounts) LogIn(ctx context.Context, email, password, address string) (models.User, error) {
	email, ok := normalEmail(email)
	if !ok {
		return models.User{}, models.Invalid(badEmail)
	}
	if err := a.checkFailures(ctx, email, address); err != nil {
		return models.User{}, err
	}
	user, err := a.logIn(ctx, email, password)
	switch {
	case errors.Is(err, models.ErrBadCredentials):
		if err := a.recordFailure(ctx, email, address); err != nil {
			return models.User{}, err
		}
	case err == nil:
		err = a.forgetFailures(ctx, email, address)
	}
	return user, err
}

func (a Accounts) logIn(ctx context.Context, email, password string) (models.User, error) {
	var user models.User
	err := a.DB.WithContext(ctx).Where("email = ?", email).Take(&user).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		// Spend a wrong password's time, so that response times do not tell
		// which emails have accounts (hashing fails at once over 72 bytes).
		_ = compareHash(a.dummyHash, []byte(password))
		return models.User{}, models.ErrBadCredentials
	}
	if err != nil {
		return models.User{}, err
	}
	if compareHash([]byte(user.PasswordHash), []byte(password)) != nil {
		return models.User{}, models.ErrBadCredentials
	}
	return user, nil
}

// IssueToken creates a bearer token for the user, valid until expires, and
// returns it. It is shown once; only its hash is stored.
func (a Accounts) IssueToken(ctx context.Context, user models.User, expires time.Time) (string, error) {
	token := "shp_" + newToken()
	err := a.DB.WithContext(ctx).Create(&models.APIToken{UserID: user.ID, TokenHash: hashToken(token), ExpiresAt: &expires}).Error
	return token, err
}

// TokenUser finds a bearer token and its user, if the token works at now:
// ErrTokenRevoked, ErrTokenExpired or ErrBadToken when it does not.
func (a Accounts) TokenUser(ctx context.Context, token string, now time.Time) (models.APIToken, models.User, error) {
	sum := sha256.Sum256([]byte(token))
	if l, ok := a.Tokens.lookUp(sum, now); ok {
		if err := refusal(l.token, now); err != nil {
			return models.APIToken{}, models.User{}, err
		}
		return l.token, l.user, nil
	}
	t, user, err := a.readToken(ctx, hex.EncodeToString(sum[:]), now)
	if err == nil {
		// read: now, before the database answered, so that it goes stale early, not late
		a.Tokens.keep(sum, tokenLookup{token: t, user: user, read: now})
	}
	return t, user, err
}

// readToken is TokenUser from the database.
func (a Accounts) readToken(ctx context.Context, hash string, now time.Time) (models.APIToken, models.User, error) {
	var t models.APIToken
	err := models.NotFoundAs(a.DB.WithContext(ctx).Where("token_hash = ?", hash).Take(&t).Error, models.ErrBadToken)
	if err := cmp.Or(err, refusal(t, now)); err != nil {
		return models.APIToken{}, models.User{}, err
	}
	user, err := a.UserByID(ctx, t.UserID)
	if errors.Is(err, models.ErrNotFound) {
		return models.APIToken{}, models.User{}, models.ErrBadToken
	}
	return t, user, err
}

// refusal is why the token does not work at now, or nil when it does.
func refusal(t models.APIToken, now time.Time) error {
	switch {
	case t.RevokedAt != nil:
		return models.ErrTokenRevoked
	case t.ExpiresAt == nil || !now.Before(*t.ExpiresAt):
		return models.ErrTokenExpired
	}
	return nil
}

// RevokeToken ends the token at now; one already revoked keeps its first
// revocation time. Other instances see it once their cached lookup goes stale.
func (a Accounts) RevokeToken(ctx context.Context, t models.APIToken, now time.Time) error {
	err := a.DB.WithContext(ctx).Model(&models.APIToken{}).Where("id = ? AND revoked_at IS NULL", t.ID).Update("revoked_at", now).Error
	if err == nil {
		a.Tokens.revoked(t, now)
	}
	return err
}

// newToken is 256 random bits, base64url: a bearer token or a session's.
func newToken() string {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // never fails: it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(raw)
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// UserByID finds the user a session names; ErrNotFound when the account is gone.
func (a Accounts) UserByID(ctx context.Context, id string) (models.User, error) {
	var user models.User
	return user, models.NotFoundAs(a.DB.WithContext(ctx).Where("id = ?", id).Take(&user).Error, models.ErrNotFound)
}

// SetRole gives the user with the email the role (for the staff command), and
// reports whether that changed anything; an error names an email no user has.
func SetRole(ctx context.Context, db *gorm.DB, email string, role models.Role) (bool, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var found int64
	if err := db.WithContext(ctx).Model(&models.User{}).Where("email = ?", email).Count(&found).Error; err != nil {
		return false, err
	}
	if found == 0 {
		return false, fmt.Errorf("no user has the email %q: sign up first", email)
	}
	res := db.WithContext(ctx).Exec("UPDATE users SET role = ? WHERE email = ? AND role <> ?", role, email, role)
	return res.RowsAffected > 0, res.Error
}

// StaffNow refuses (models.ErrForbidden) a user who is not staff as tx reads
// the database, whatever a cache says: a staff act that moves money or stock
// calls it in its own transaction, so a removal on any instance is seen at once.
func StaffNow(tx *gorm.DB, userID string) error {
	var n int64
	if err := tx.Model(&models.User{}).Where("id = ? AND role = ?", userID, models.Staff).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return models.ErrForbidden
	}
	return nil
}
