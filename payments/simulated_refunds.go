package payments

import (
	"context"
	"errors"
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
	s.calls.Add(1)
	if err := wait(ctx, s.Latency/2); err != nil {
		return RefundAnswer{}, err
	}
	var stored SimulatedRefund
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		refund, fresh, err := s.newRefund(tx, req)
		if err != nil {
			return err
		}
		if fresh {
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&refund).Error; err != nil {
				return fmt.Errorf("record refund: %w", err)
			}
		}
		return tx.Where("idempotency_key = ?", req.IdempotencyKey).Take(&stored).Error
	})
	if err != nil {
		return RefundAnswer{}, err
	}
	if stored.ChargeID != req.ChargeID || stored.AmountCents != req.AmountCents {
		return RefundAnswer{}, errors.New("payment provider: idempotency key reused with different parameters")
	}
	if err := wait(ctx, s.Latency-s.Latency/2); err != nil {
		return RefundAnswer{}, err // refunded, and the reply lost
	}
	return stored.answer(), nil
}

// newRefund is the refund the request makes if its key is new (fresh):
// refused when the charge is unknown or has not that much left. A repeat
// makes none: its first answer stands.
func (s *Simulated) newRefund(tx *gorm.DB, req RefundRequest) (refund SimulatedRefund, fresh bool, err error) {
	var existing int64
	if err := tx.Model(&SimulatedRefund{}).Where("idempotency_key = ?", req.IdempotencyKey).Count(&existing).Error; err != nil || existing > 0 {
		return SimulatedRefund{}, false, err
	}
	var charge SimulatedCharge
	err = tx.Where("id = ? AND status = ?", req.ChargeID, models.Succeeded).Take(&charge).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return SimulatedRefund{}, false, errNoSuchCharge
	}
	if err != nil {
		return SimulatedRefund{}, false, err
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
	var stored SimulatedRefund
	err := s.DB.WithContext(ctx).Where("idempotency_key = ?", req.IdempotencyKey).Take(&stored).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return RefundAnswer{}, false, nil
	}
	if err != nil {
		return RefundAnswer{}, false, fmt.Errorf("read refund: %w", err)
	}
	return stored.answer(), true, nil
}
