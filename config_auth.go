package main

import (
	"fmt"
	"time"
)

// loadAuthExpiry reads PAYMENT_AUTH_EXPIRY: how long a payment that asks
// the shopper to authenticate (3-D Secure) waits for them, and holds its
// order, before it expires as declined.
func loadAuthExpiry(cfg *config, getenv func(string) string) []error {
	raw := withDefault(getenv("PAYMENT_AUTH_EXPIRY"), "15m")
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		return []error{fmt.Errorf("PAYMENT_AUTH_EXPIRY=%q: want a positive duration such as 15m", raw)}
	}
	cfg.AuthExpiry = d
	return nil
}
