package audit

import (
	"context"

	"github.com/shop/shop/models"
)

// Traces are the rows a user's operations left, by the keys they carried:
// orders and refunds by DerivedKey, payments by ProviderKey; and every
// order's number by id, since an operation may name any order.
type Traces struct {
	Orders   map[string]models.Order
	Payments map[string]models.Payment
	Refunds  map[string]models.Refund
	Numbers  map[string]int64
}

// TracesOf finds the user's orders, payments and refunds written under refs.
func (s Trail) TracesOf(ctx context.Context, userID string, refs []string) (Traces, error) {
	t := Traces{Orders: map[string]models.Order{}, Payments: map[string]models.Payment{}, Refunds: map[string]models.Refund{}, Numbers: map[string]int64{}}
	if len(refs) == 0 {
		return t, nil
	}
	db := s.DB.WithContext(ctx)
	var orders []models.Order
	if err := db.Where("user_id = ? AND derived_key IN ?", userID, refs).Find(&orders).Error; err != nil {
		return t, err
	}
	for _, o := range orders {
		t.Orders[o.DerivedKey] = o
	}
	var numbered []models.Order
	if err := db.Select("id", "number").Where("user_id = ?", userID).Find(&numbered).Error; err != nil {
		return t, err
	}
	for _, o := range numbered {
		t.Numbers[o.ID] = o.Number
	}
	var payments []models.Payment
	err := db.Select("payments.*").Joins("JOIN orders ON orders.id = payments.order_id").
		Where("orders.user_id = ? AND payments.provider_key IN ?", userID, refs).Find(&payments).Error
	if err != nil {
		return t, err
	}
	for _, p := range payments {
		t.Payments[p.ProviderKey] = p
	}
	var refunds []models.Refund
	err = db.Select("refunds.*").Joins("JOIN orders ON orders.id = refunds.order_id").
		Where("orders.user_id = ? AND refunds.derived_key IN ?", userID, refs).Order("refunds.created_at").Find(&refunds).Error
	if err != nil {
		return t, err
	}
	for _, r := range refunds {
		t.Refunds[r.DerivedKey] = r // the last attempt of the operation
	}
	return t, nil
}
