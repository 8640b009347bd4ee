package payments

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
)

// AuthPath is where the shop serves the simulated provider's authentication
// page, as a card issuer's test page: the charge's id follows.
const AuthPath = "/simulated-provider/authenticate/"

// Authentication is a charge that asks the shopper to authenticate, as the
// simulated provider's page shows it.
type Authentication struct {
	ChargeID string
	// Key is the idempotency key the charge was asked with.
	Key         string
	AmountCents int64
	Currency    string
	Status      models.State
}

// Authenticator is a provider that serves its own authentication page:
// the simulation. A real provider's page is its own site.
type Authenticator interface {
	Authentication(ctx context.Context, chargeID string) (Authentication, bool, error)
	// Authenticate records the shopper's answer, once: a second answer, or
	// one after the expiry, changes nothing.
	Authenticate(ctx context.Context, chargeID string, complete bool) (Authentication, bool, error)
}

// authURL is the page the shopper authenticates a charge on; the return
// URL rides along, kept to its path on this site.
func authURL(chargeID, returnURL string) string {
	path := "/"
	if u, err := url.Parse(returnURL); err == nil {
		path = u.RequestURI()
	}
	return AuthPath + chargeID + "?" + url.Values{"return_url": {LocalPath(path)}}.Encode()
}

// LocalPath is target when it is plainly a path on this site, and "/"
// otherwise: the one check of every redirect the shop takes from a request
// (the log-in's next, the authentication's return URL). Browsers read a
// backslash as a slash and drop tabs and newlines, so "/\\evil" or
// "/\t/evil" would leave the site: anything unusual is refused.
func LocalPath(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") ||
		strings.ContainsRune(target, '\\') || strings.IndexFunc(target, unicode.IsControl) >= 0 {
		return "/"
	}
	return target
}

// expire declines the charges whose authentication passed its expiry, as
// the provider would on its own; called before any read of the ledger.
func (s *Simulated) expire(db *gorm.DB, where string, arg any) error {
	return db.Model(&SimulatedCharge{}).
		Where(where, arg).
		Where("status = ? AND created_at <= ?", models.RequiresAction, s.now().Add(-s.AuthExpiry)).
		Updates(map[string]any{"status": models.Declined, "decline_reason": authExpired}).Error
}

// Authentication implements Authenticator.
func (s *Simulated) Authentication(ctx context.Context, chargeID string) (Authentication, bool, error) {
	db := s.DB.WithContext(ctx)
	if err := s.expire(db, "id = ?", chargeID); err != nil {
		return Authentication{}, false, err
	}
	stored, found, err := recorded[SimulatedCharge](db, "id = ? AND payment_method = ?", chargeID, MethodAuthentication)
	if !found {
		return Authentication{}, false, err
	}
	return Authentication{ChargeID: stored.ID, Key: stored.IdempotencyKey, AmountCents: stored.AmountCents, Currency: stored.Currency, Status: stored.Status}, true, nil
}

// Authenticate implements Authenticator: one conditional update of the
// ledger, so a double-click on either button records one answer.
func (s *Simulated) Authenticate(ctx context.Context, chargeID string, complete bool) (Authentication, bool, error) {
	db := s.DB.WithContext(ctx)
	if err := s.expire(db, "id = ?", chargeID); err != nil {
		return Authentication{}, false, err
	}
	answer := map[string]any{"status": models.Succeeded, "decline_reason": ""}
	if !complete {
		answer = map[string]any{"status": models.Declined, "decline_reason": authFailed}
	}
	if err := db.Model(&SimulatedCharge{}).Where("id = ? AND status = ?", chargeID, models.RequiresAction).Updates(answer).Error; err != nil {
		return Authentication{}, false, fmt.Errorf("record authentication: %w", err)
	}
	return s.Authentication(ctx, chargeID)
}
