package models

import (
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Restock sets through tx, as SetStock does, the units on hand of the
// product with the SKU, by the staff user by (ErrForbidden for anyone
// else), and records it in the audit trail: an act on no order.
func (s Shop) Restock(tx *gorm.DB, by User, sku string, units int, now time.Time) (Product, error) {
	if !by.IsStaff() {
		return Product{}, ErrForbidden
	}
	p, err := Shop{DB: tx}.SetStock(tx.Statement.Context, sku, units)
	if err != nil {
		return Product{}, err
	}
	return p, Audit(tx, Entry{Action: ActionRestocked, Actor: UserActor(by), SubjectID: p.ID, Reason: fmt.Sprintf("%d units on hand", units), At: now})
}
