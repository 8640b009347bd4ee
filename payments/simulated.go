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

// roundTrip is one request's trip to the provider: half the latency out,
// do at the provider, half back. A caller that gives up in the second half
// loses the reply of what was done.
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

// recorded reads the provider's record the query finds, if there is one.
func recorded[T any](query *gorm.DB, args ...any) (T, bool, error) {
	var record T
	err := query.Take(&record, args...).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return record, false, nil
	}
	return record, err == nil, err
}

// errKeyReused: a request under a key the provider saw with other
// parameters.
var errKeyReused = errors.New("payment provider: idempotency key reused with different parameters")

// Charge implements Provider.
func (s *Simulated) Charge(ctx context.Context, req ChargeRequest) (Charge, error) {
	stored, err := roundTrip(ctx, s, func(db *gorm.DB) (SimulatedCharge, error) {
		if req.PaymentMethod == MethodUnavailable {
			// Refused before anything is recorded, every time: nothing is
			// charged under the key, now or later.
			return SimulatedCharge{}, fmt.Errorf("%w: the payment method %s is not accepted", ErrRefused, req.PaymentMethod)
		}
		charge := SimulatedCharge{ID: "ch_" + strings.ReplaceAll(uuid.NewString(), "-", ""), IdempotencyKey: req.IdempotencyKey,
			AmountCents: req.AmountCents, Currency: req.Currency, PaymentMethod: req.PaymentMethod, Status: models.Succeeded, CreatedAt: s.now()}
		switch req.PaymentMethod {
		case MethodAuthentication:
			charge.Status = models.RequiresAction
		case MethodDeclined, MethodChargeDeclined:
			charge.Status, charge.DeclineReason = models.Declined, "Your card was declined."
		case MethodInsufficientFunds:
			charge.Status, charge.DeclineReason = models.Declined, "Your card has insufficient funds."
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

func (c SimulatedCharge) answer(req ChargeRequest) Charge {
	charge := Charge{ID: c.ID, Status: c.Status, DeclineReason: c.DeclineReason}
	if c.Status == models.RequiresAction {
		charge.NextActionURL = authURL(c.ID, req.ReturnURL)
	}
	return charge
}

// find reads the charge made under key, its authentication expired first if
// it is past its time.
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
