package models

import "fmt"

// Money is an amount in a shopper's words: $12.50, or 12.50 EUR.
func Money(cents int64, currency string) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	amount := fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
	if currency == "USD" {
		return "$" + amount
	}
	return amount + " " + currency
}
