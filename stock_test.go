package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shop/shop/internal/testkit"
)

// `shop stock set SKU N` sets the product's stock, the same again changes
// nothing, and an unknown SKU or a count that is not one is refused with
// an error saying so, the stock left as it was.
func TestStockSetCommand(t *testing.T) {
	env := map[string]string{"DATABASE_URL": testkit.URL(t)}
	shop := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"shop"}, args...), func(k string) string { return env[k] }, &out)
		return out.String(), err
	}
	for range 2 {
		if out, err := shop("stock", "set", "VINYL-LTD", "12"); err != nil || out != "VINYL-LTD (Vinyl record (limited edition)): 12 on hand, 0 held by unpaid orders, 12 for sale\n" {
			t.Fatalf("shop stock set VINYL-LTD 12: %q (%v)", out, err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stock", "set", "NO-SUCH", "3"}, `no product has this SKU: "NO-SUCH"`},
		{[]string{"stock", "set", "VINYL-LTD", "-1"}, "UNITS must be a whole number, 0 or more"},
		{[]string{"stock", "set", "VINYL-LTD", "many"}, "UNITS must be a whole number, 0 or more"},
		{[]string{"stock", "add", "VINYL-LTD", "3"}, "usage: shop stock set SKU UNITS"},
		{[]string{"stock"}, "usage: shop stock set SKU UNITS"},
	} {
		if out, err := shop(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) || out != "" {
			t.Fatalf("shop %s: %q, %v; want the error %q", strings.Join(tc.args, " "), out, err, tc.want)
		}
	}
	db := testkit.Open(t, env["DATABASE_URL"])
	var stock int
	if err := db.Table("products").Where("sku = ?", "VINYL-LTD").Select("stock").Scan(&stock).Error; err != nil || stock != 12 {
		t.Fatalf("stock %d (%v), want 12", stock, err)
	}
}
