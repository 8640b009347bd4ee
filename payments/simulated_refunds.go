package payments

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/models"
)

// SimulatedRefund is the simulated provider's own record of a refund,
// keyed by the idempotency key it was asked with: the provider's refund
// ledger, which tests count.
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

// errNoSuchCharge and errRefundTooLarge are the simulation's refusals of a
// refund request itself: the same request is refused the same way always.
var (
	errNoSuchCharge   = fmt.Errorf("%w: no succeeded charge with this id", ErrRefused)
	errRefundTooLarge = fmt.Errorf("%w: the amount is more than the charge has left to refund", ErrRefused)
)

// Refund implements Provider: deduplicated by key like Charge, and never
// more than the charge has left. A charge made with MethodRefundFail gets
// failed refunds ("the card account is closed").
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

// newRefund is the refund the request makes if its key is new (fresh):
// refused when the charge is unknown or has not that much left. A repeat
// makes none: its first answer stands.
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
	refund = SimulatedRefund{
		ID: "re_" + strings.ReplaceAll(uuid.NewString(), "-", ""), IdempotencyKey: req.IdempotencyKey, ChargeID: charge.ID,
		AmountCents: req.AmountCents, Currency: req.Currency, Status: models.Succeeded,
	}
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
