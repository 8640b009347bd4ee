package models

// Role is what a user may do: shop, or also run the shop.
type Role string

const (
	Shopper Role = "shopper"
	Staff   Role = "staff"
)

// IsStaff reports whether the user is one of the shop's staff, who give
// refunds.
func (u User) IsStaff() bool { return u.Role == Staff }
