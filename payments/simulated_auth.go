package payments

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
)

// AuthPath is where the shop serves the simulated provider's authentication
// page, as a card issuer's test page: the charge's id follows.
const AuthPath = "/simulated-provider/authenticate/"

// Authentication is a charge that asks the shopper to authenticate, as the
// simulated provider's page shows it.
type Authentication struct {
	ChargeID    string
	AmountCents int64
	Currency    string
	Status      models.PaymentStatus
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
// URL rides along.
func authURL(chargeID, returnURL string) string {
	return AuthPath + chargeID + "?" + url.Values{"return_url": {ReturnPath(returnURL)}}.Encode()
}

// ReturnPath is a return URL kept to its path on this site, so that the
// authentication page never sends the shopper to another one.
func ReturnPath(returnURL string) string {
	u, err := url.Parse(returnURL)
	if err != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return (&url.URL{Path: u.Path, RawQuery: u.RawQuery}).String()
}

// expire declines the charges whose authentication passed its expiry, as
// the provider would on its own; called before any read of the ledger.
func (s *Simulated) expire(db *gorm.DB, where string, arg any) error {
	return db.Model(&SimulatedCharge{}).
		Where(where, arg).
		Where("status = ? AND created_at <= ?", models.PaymentRequiresAction, s.now().Add(-s.AuthExpiry)).
		Updates(map[string]any{"status": models.PaymentDeclined, "decline_reason": authExpired}).Error
}

// Authentication implements Authenticator.
func (s *Simulated) Authentication(ctx context.Context, chargeID string) (Authentication, bool, error) {
	db := s.DB.WithContext(ctx)
	if err := s.expire(db, "id = ?", chargeID); err != nil {
		return Authentication{}, false, err
	}
	var stored SimulatedCharge
	err := db.Where("id = ? AND payment_method = ?", chargeID, MethodAuthentication).Take(&stored).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Authentication{}, false, nil
	}
	if err != nil {
		return Authentication{}, false, fmt.Errorf("read charge: %w", err)
	}
	return Authentication{ChargeID: stored.ID, AmountCents: stored.AmountCents, Currency: stored.Currency, Status: stored.Status}, true, nil
}

// Authenticate implements Authenticator: one conditional update of the
// ledger, so a double-click on either button records one answer.
func (s *Simulated) Authenticate(ctx context.Context, chargeID string, complete bool) (Authentication, bool, error) {
	db := s.DB.WithContext(ctx)
	if err := s.expire(db, "id = ?", chargeID); err != nil {
		return Authentication{}, false, err
	}
	answer := map[string]any{"status": models.PaymentSucceeded, "decline_reason": ""}
	if !complete {
		answer = map[string]any{"status": models.PaymentDeclined, "decline_reason": authFailed}
	}
	if err := db.Model(&SimulatedCharge{}).Where("id = ? AND status = ?", chargeID, models.PaymentRequiresAction).Updates(answer).Error; err != nil {
		return Authentication{}, false, fmt.Errorf("record authentication: %w", err)
	}
	return s.Authentication(ctx, chargeID)
}
