package models

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/shop/shop/problem"
)

// Role is what a user may do: shop, or also run the shop.
type Role string

const (
	Shopper Role = "shopper"
	Staff   Role = "staff"
)

// IsStaff reports whether the user is one of the shop's staff, who give
// refunds.
func (u User) IsStaff() bool { return u.Role == Staff }

// ordersOf are the orders the user may act on: every user's for staff, a
// shopper's own.
func ordersOf(u User) whose {
	if u.IsStaff() {
		return anyOrder
	}
	return ownedBy(u.ID)
}

// ErrForbidden: the caller is known, but not allowed to do this (a
// shopper asking for what only staff may do). Not final: nothing began.
var ErrForbidden = Declare(&Error{Type: problem.Forbidden, Message: "Only the shop's staff may do this.",
	Shopper: Words{Heading: "Not allowed", Text: "Only the shop's staff may do this; nothing was done."}})

// SetRole gives the user with the email the role: idempotent, reporting
// whether it changed anything; an error naming the email when there is no
// such user. Nothing on the web calls it: the staff command does.
func SetRole(ctx context.Context, db *gorm.DB, email string, role Role) (bool, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var found int64
	if err := db.WithContext(ctx).Model(&User{}).Where("email = ?", email).Count(&found).Error; err != nil {
		return false, err
	}
	if found == 0 {
		return false, fmt.Errorf("no user has the email %q: sign up first", email)
	}
	res := db.WithContext(ctx).Exec("UPDATE users SET role = ? WHERE email = ? AND role <> ?", role, email, role)
	return res.RowsAffected > 0, res.Error
}
