package orders

import (
	"fmt"
	"time"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"gorm.io/gorm"
)

// Restock sets through tx, as SetStock does, the units on hand of the
// product with the SKU, by the staff user by (models.ErrForbidden for anyone
// else), and records it in the audit trail: an act on no order.
func (s Store) Restock(tx *gorm.DB, by models.User, sku string, units int, now time.Time) (models.Product, error) {
	if !by.IsStaff() {
		return models.Product{}, models.ErrForbidden
	}
	p, err := Store{DB: tx}.SetStock(tx.Statement.Context, sku, units)
	if err != nil {
		return models.Product{}, err
	}
	return p, audit.Audit(tx, audit.Entry{Action: audit.ActionRestocked, Actor: audit.UserActor(by), SubjectID: p.ID, Reason: fmt.Sprintf("%d units on hand", units), At: now})
}
