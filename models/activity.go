package models

import "context"

// Traces are the rows a user's operations left behind, found by the derived
// keys those operations carried: the orders they placed (by DerivedKey)
// and the payments they recorded (by ProviderKey).
type Traces struct {
	Orders   map[string]Order
	Payments map[string]Payment
}

// TracesOf finds the user's orders and payments written under refs.
func (s Shop) TracesOf(ctx context.Context, userID string, refs []string) (Traces, error) {
	t := Traces{Orders: map[string]Order{}, Payments: map[string]Payment{}}
	if len(refs) == 0 {
		return t, nil
	}
	db := s.DB.WithContext(ctx)
	var orders []Order
	if err := db.Where("user_id = ? AND derived_key IN ?", userID, refs).Find(&orders).Error; err != nil {
		return t, err
	}
	for _, o := range orders {
		t.Orders[o.DerivedKey] = o
	}
	var payments []Payment
	err := db.Select("payments.*").Joins("JOIN orders ON orders.id = payments.order_id").
		Where("orders.user_id = ? AND payments.provider_key IN ?", userID, refs).Find(&payments).Error
	if err != nil {
		return t, err
	}
	for _, p := range payments {
		t.Payments[p.ProviderKey] = p
	}
	return t, nil
}
