package main

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// loadAuth reads PAYMENT_AUTH_EXPIRY: how long a payment that asks
// the shopper to authenticate (3-D Secure) waits for them, and holds its
// order, before it expires as declined; and PUBLIC_URL.
func (cfg *config) loadAuth(getenv func(string) string) []error {
	raw := withDefault(getenv("PAYMENT_AUTH_EXPIRY"), "15m")
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		return []error{fmt.Errorf("PAYMENT_AUTH_EXPIRY=%q: want a positive duration such as 15m", raw)}
	}
	cfg.AuthExpiry = d
	return cfg.loadPublicURL(getenv)
}

// loadPublicURL reads PUBLIC_URL: the shop's address as shoppers reach it,
// which a card provider sends them back to after an authentication (Stripe
// wants an absolute return_url). http://localhost:PORT when empty.
func (cfg *config) loadPublicURL(getenv func(string) string) []error {
	raw := strings.TrimRight(strings.TrimSpace(getenv("PUBLIC_URL")), "/")
	if raw == "" {
		raw = "http://localhost:" + strconv.Itoa(cfg.Port)
	}
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return []error{fmt.Errorf("PUBLIC_URL=%q: want the shop's address, such as https://shop.example.com", raw)}
	}
	cfg.PublicURL = raw
	return nil
}
