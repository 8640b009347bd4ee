package orders

import "github.com/shop/shop/models"

// OrdersOf are the orders the user may act on: every user's for staff, a
// shopper's own.
func OrdersOf(u models.User) Whose {
	if u.IsStaff() {
		return AnyOrder
	}
	return OwnedBy(u.ID)
}
