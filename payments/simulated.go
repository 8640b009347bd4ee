package payments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/models"
)

// SimulatedCharge is the simulated provider's own record of a charge, keyed
// by the idempotency key it was asked with. It lives in its own table, written
// outside the shop's transactions, the way a real provider's ledger would.
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

// Simulated is the built-in provider. It deduplicates durably by idempotency
// key: a repeated request gets the first answer, and charges nothing more.
// Latency is a round trip: half of it before the charge is made, half after,
// as a reply travels back — so a caller that gives up, or dies, in the second
// half has been charged without knowing it, as with a real provider.
type Simulated struct {
	DB      *gorm.DB
	Latency time.Duration
	// AuthExpiry is how long a charge that asks the shopper to
	// authenticate waits for them (PAYMENT_AUTH_EXPIRY); Now is the
	// clock it is measured by (time.Now when nil).
	AuthExpiry time.Duration
	Now        func() time.Time
	calls      atomic.Int64
}

func (s *Simulated) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
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

// Calls counts the requests the provider received, repeats included.
func (s *Simulated) Calls() int64 { return s.calls.Load() }

// Charge implements Provider.
func (s *Simulated) Charge(ctx context.Context, req ChargeRequest) (Charge, error) {
	s.calls.Add(1)
	if err := wait(ctx, s.Latency/2); err != nil {
		return Charge{}, err
	}
	if req.PaymentMethod == MethodUnavailable {
		// Refused before anything is recorded, every time: nothing is
		// charged under the key, now or later.
		return Charge{}, fmt.Errorf("%w: the payment method %s is not accepted", ErrRefused, req.PaymentMethod)
	}
	charge := SimulatedCharge{
		ID:             "ch_" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		IdempotencyKey: req.IdempotencyKey,
		AmountCents:    req.AmountCents,
		Currency:       req.Currency,
		PaymentMethod:  req.PaymentMethod,
		Status:         models.Succeeded,
		CreatedAt:      s.now(),
	}
	switch req.PaymentMethod {
	case MethodAuthentication:
		charge.Status = models.RequiresAction
	case MethodDeclined, MethodChargeDeclined:
		charge.Status, charge.DeclineReason = models.Declined, "Your card was declined."
	case MethodInsufficientFunds:
		charge.Status, charge.DeclineReason = models.Declined, "Your card has insufficient funds."
	}
	db := s.DB.WithContext(ctx)
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&charge).Error; err != nil {
		return Charge{}, fmt.Errorf("record charge: %w", err)
	}
	if err := s.expire(db, "idempotency_key = ?", req.IdempotencyKey); err != nil {
		return Charge{}, fmt.Errorf("expire authentication: %w", err)
	}
	var stored SimulatedCharge
	if err := db.Where("idempotency_key = ?", req.IdempotencyKey).Take(&stored).Error; err != nil {
		return Charge{}, fmt.Errorf("read charge: %w", err)
	}
	if stored.AmountCents != req.AmountCents || stored.Currency != req.Currency || stored.PaymentMethod != req.PaymentMethod {
		return Charge{}, errors.New("payment provider: idempotency key reused with different parameters")
	}
	if err := wait(ctx, s.Latency-s.Latency/2); err != nil {
		return Charge{}, err // charged, and the reply lost
	}
	return stored.answer(req), nil
}

func (c SimulatedCharge) answer(req ChargeRequest) Charge {
	charge := Charge{ID: c.ID, Status: c.Status, DeclineReason: c.DeclineReason}
	if c.Status == models.RequiresAction {
		charge.NextActionURL = authURL(c.ID, req.ReturnURL)
	}
	return charge
}

// Find implements Provider: the simulation's ledger is its record.
func (s *Simulated) Find(ctx context.Context, req ChargeRequest) (Charge, bool, error) {
	db := s.DB.WithContext(ctx)
	if err := s.expire(db, "idempotency_key = ?", req.IdempotencyKey); err != nil {
		return Charge{}, false, fmt.Errorf("expire authentication: %w", err)
	}
	var stored SimulatedCharge
	err := db.Where("idempotency_key = ?", req.IdempotencyKey).Take(&stored).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Charge{}, false, nil
	}
	if err != nil {
		return Charge{}, false, fmt.Errorf("read charge: %w", err)
	}
	return stored.answer(req), true, nil
}

// KeyLifetime implements Provider: the simulation never forgets a key.
func (s *Simulated) KeyLifetime() time.Duration { return math.MaxInt64 }
