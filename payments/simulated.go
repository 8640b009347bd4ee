package payments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/models"
)

// SimulatedCharge and SimulatedRefund are the simulation's own ledger,
// keyed by idempotency key, written outside the shop's transactions.
type SimulatedCharge struct {
	ID             string       `gorm:"primaryKey;size:40"`
	IdempotencyKey string       `gorm:"size:255;not null;uniqueIndex"`
	AmountCents    int64        `gorm:"not null"`
	Currency       string       `gorm:"size:3;not null"`
	PaymentMethod  string       `gorm:"size:64;not null"`
	Status         models.State `gorm:"size:16;not null"`
	DeclineReason  string       `gorm:"size:200"`
	CreatedAt      time.Time    `gorm:"not null"`
}

type SimulatedRefund struct {
	ID             string       `gorm:"primaryKey;size:40"`
	IdempotencyKey string       `gorm:"size:255;not null;uniqueIndex"`
	ChargeID       string       `gorm:"size:40;not null;index"`
	AmountCents    int64        `gorm:"not null"`
	Currency       string       `gorm:"size:3;not null"`
	Status         models.State `gorm:"size:16;not null"`
	FailureReason  string       `gorm:"size:200"`
	CreatedAt      time.Time    `gorm:"not null"`
}

// Simulated is the built-in provider, deduplicating durably by key. Latency
// is a round trip, half before the request is carried out and half after,
// so a caller that gives up in the second half was charged unknowing, as
// with a real provider. A charge waits AuthExpiry for the shopper, by Now.
type Simulated struct {
	DB                  *gorm.DB
	Latency, AuthExpiry time.Duration
	Now                 func() time.Time
	calls               atomic.Int64
}

func (s *Simulated) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Simulated) Calls() int64 { return s.calls.Load() }

// roundTrip is one request's trip: half the latency out, do, half back.
func roundTrip[T any](ctx context.Context, s *Simulated, do func(db *gorm.DB) (T, error)) (T, error) {
	s.calls.Add(1)
	var none T
	if err := wait(ctx, s.Latency/2); err != nil {
		return none, err
	}
	done, err := do(s.DB.WithContext(ctx))
	if err != nil {
		return none, err
	}
	if err := wait(ctx, s.Latency-s.Latency/2); err != nil {
		return none, err // done, and the reply lost
	}
	return done, nil
}

// wait sleeps for d, or returns the context's error when it ends first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recorded reads the record the query finds, if any.
func recorded[T any](query *gorm.DB, args ...any) (T, bool, error) {
	var record T
	err := query.Take(&record, args...).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return record, false, nil
	}
	return record, err == nil, err
}

// The simulation's refusals, alike every time.
var (
	errKeyReused      = errors.New("payment provider: idempotency key reused with different parameters")
	errNoSuchCharge   = fmt.Errorf("%w: no succeeded charge with this id", ErrRefused)
	errRefundTooLarge = fmt.Errorf("%w: the amount is more than the charge has left to refund", ErrRefused)
)

// declines are the test cards the simulation declines, and why.
var declines = map[string]string{
	MethodDeclined: "Your card was declined.", MethodChargeDeclined: "Your card was declined.",
	MethodInsufficientFunds: "Your card has insufficient funds.",
}

// Charge implements Provider.
func (s *Simulated) Charge(ctx context.Context, req ChargeRequest) (Charge, error) {
	stored, err := roundTrip(ctx, s, func(db *gorm.DB) (SimulatedCharge, error) {
		if req.PaymentMethod == MethodUnavailable {
			// Refused before anything is recorded, every time.
			return SimulatedCharge{}, fmt.Errorf("%w: the payment method %s is not accepted", ErrRefused, req.PaymentMethod)
		}
		charge := SimulatedCharge{ID: newID("ch_"), IdempotencyKey: req.IdempotencyKey,
			AmountCents: req.AmountCents, Currency: req.Currency, PaymentMethod: req.PaymentMethod, Status: models.Succeeded, CreatedAt: s.now()}
		if reason, declined := declines[req.PaymentMethod]; declined {
			charge.Status, charge.DeclineReason = models.Declined, reason
		} else if req.PaymentMethod == MethodAuthentication {
			charge.Status = models.RequiresAction
		}
		if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&charge).Error; err != nil {
			return SimulatedCharge{}, fmt.Errorf("record charge: %w", err)
		}
		stored, _, err := s.find(db, req.IdempotencyKey)
		if err == nil && (stored.AmountCents != req.AmountCents || stored.Currency != req.Currency || stored.PaymentMethod != req.PaymentMethod) {
			err = errKeyReused
		}
		return stored, err
	})
	if err != nil {
		return Charge{}, err
	}
	return stored.answer(req), nil
}

func newID(prefix string) string { return prefix + strings.ReplaceAll(uuid.NewString(), "-", "") }

func (c SimulatedCharge) answer(req ChargeRequest) Charge {
	charge := Charge{ID: c.ID, Status: c.Status, DeclineReason: c.DeclineReason}
	if c.Status == models.RequiresAction {
		charge.NextActionURL = authURL(c.ID, req.ReturnURL)
	}
	return charge
}

// find reads the charge made under key, expired first if past its time.
func (s *Simulated) find(db *gorm.DB, key string) (SimulatedCharge, bool, error) {
	if err := s.expire(db, "idempotency_key = ?", key); err != nil {
		return SimulatedCharge{}, false, fmt.Errorf("expire authentication: %w", err)
	}
	return recorded[SimulatedCharge](db, "idempotency_key = ?", key)
}

// Find implements Provider: the simulation's ledger is its record.
func (s *Simulated) Find(ctx context.Context, req ChargeRequest) (Charge, bool, error) {
	stored, found, err := s.find(s.DB.WithContext(ctx), req.IdempotencyKey)
	return stored.answer(req), found, err
}

// KeyLifetime implements Provider: the simulation never forgets a key.
func (s *Simulated) KeyLifetime() time.Duration { return math.MaxInt64 }

// Refund implements Provider: never more than the charge has left; a
// charge made with MethodRefundFail gets failed refunds.
func (s *Simulated) Refund(ctx context.Context, req RefundRequest) (RefundAnswer, error) {
	stored, err := roundTrip(ctx, s, func(db *gorm.DB) (stored SimulatedRefund, err error) {
		err = db.Transaction(func(tx *gorm.DB) error {
			refund, fresh, err := s.newRefund(tx, req)
			if err == nil && fresh {
				err = tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&refund).Error
			}
			if err == nil {
				stored, _, err = recorded[SimulatedRefund](tx, "idempotency_key = ?", req.IdempotencyKey)
			}
			return err
		})
		if err == nil && (stored.ChargeID != req.ChargeID || stored.AmountCents != req.AmountCents) {
			err = errKeyReused
		}
		return stored, err
	})
	return stored.answer(), err
}

// newRefund is the refund a new key makes (fresh), if the charge allows it.
func (s *Simulated) newRefund(tx *gorm.DB, req RefundRequest) (refund SimulatedRefund, fresh bool, err error) {
	if _, repeat, err := recorded[SimulatedRefund](tx.Select("id"), "idempotency_key = ?", req.IdempotencyKey); err != nil || repeat {
		return SimulatedRefund{}, false, err
	}
	charge, found, err := recorded[SimulatedCharge](tx, "id = ? AND status = ?", req.ChargeID, models.Succeeded)
	if err != nil {
		return SimulatedRefund{}, false, err
	}
	if !found {
		return SimulatedRefund{}, false, errNoSuchCharge
	}
	var refunded int64
	if err := tx.Model(&SimulatedRefund{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("charge_id = ? AND status <> ?", charge.ID, models.Failed).Scan(&refunded).Error; err != nil {
		return SimulatedRefund{}, false, err
	}
	if req.AmountCents <= 0 || refunded+req.AmountCents > charge.AmountCents {
		return SimulatedRefund{}, false, errRefundTooLarge
	}
	refund = SimulatedRefund{ID: newID("re_"), IdempotencyKey: req.IdempotencyKey, ChargeID: charge.ID,
		AmountCents: req.AmountCents, Currency: req.Currency, Status: models.Succeeded}
	if charge.PaymentMethod == MethodRefundFail {
		refund.Status, refund.FailureReason = models.Failed, "The card's account is closed."
	}
	return refund, true, nil
}

func (r SimulatedRefund) answer() RefundAnswer {
	return RefundAnswer{ID: r.ID, State: r.Status, FailureReason: r.FailureReason}
}

// FindRefund implements Provider: the simulation's refund ledger.
func (s *Simulated) FindRefund(ctx context.Context, req RefundRequest) (RefundAnswer, bool, error) {
	stored, found, err := recorded[SimulatedRefund](s.DB.WithContext(ctx), "idempotency_key = ?", req.IdempotencyKey)
	return stored.answer(), found, err
}

// AuthPath is where the shop serves the simulation's authentication page,
// the charge's id following.
const AuthPath = "/simulated-provider/authenticate/"

// Authentication is a charge waiting for the shopper, as the page shows it.
type Authentication struct {
	ChargeID, Key string
	AmountCents   int64
	Currency      string
	Status        models.State
}

// Authenticator is a provider whose authentication page the shop serves:
// the simulation. Authenticate records the shopper's first answer only.
type Authenticator interface {
	Authentication(ctx context.Context, chargeID string) (Authentication, bool, error)
	Authenticate(ctx context.Context, chargeID string, complete bool) (Authentication, bool, error)
}

// authURL is the charge's authentication page; the return URL rides along,
// kept to its path on this site.
func authURL(chargeID, returnURL string) string {
	path := "/"
	if u, err := url.Parse(returnURL); err == nil {
		path = u.RequestURI()
	}
	return AuthPath + chargeID + "?" + url.Values{"return_url": {LocalPath(path)}}.Encode()
}

// LocalPath is target when it is plainly a path on this site, else "/": the
// one check of every redirect the shop takes from a request (browsers read
// a backslash as a slash and drop tabs and newlines).
func LocalPath(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") ||
		strings.ContainsRune(target, '\\') || strings.IndexFunc(target, unicode.IsControl) >= 0 {
		return "/"
	}
	return target
}

// expire declines the charges past their authentication's expiry, before
// any read of the ledger.
func (s *Simulated) expire(db *gorm.DB, where string, arg any) error {
	return db.Model(&SimulatedCharge{}).
		Where(where, arg).
		Where("status = ? AND created_at <= ?", models.RequiresAction, s.now().Add(-s.AuthExpiry)).
		Updates(map[string]any{"status": models.Declined, "decline_reason": AuthExpired}).Error
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

// Authenticate implements Authenticator: one conditional update, so a
// double-click records one answer.
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
