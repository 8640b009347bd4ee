package main

import (
	"fmt"
	"time"
)

// orderConfig is how long an order may wait unpaid before the sweep
// cancels it and its units go back on sale (handlers.Deps.OrderExpiry).
type orderConfig struct {
	OrderExpiry time.Duration
}

// loadOrders reads ORDER_EXPIRY: a positive duration, 30m when unset.
func (cfg *orderConfig) loadOrders(getenv func(string) string) []error {
	v, err := time.ParseDuration(withDefault(getenv("ORDER_EXPIRY"), "30m"))
	if err != nil || v <= 0 {
		return []error{fmt.Errorf("ORDER_EXPIRY=%q: want a positive duration such as 30m, how long an order may wait unpaid", getenv("ORDER_EXPIRY"))}
	}
	cfg.OrderExpiry = v
	return nil
}
