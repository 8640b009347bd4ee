package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shop/shop/internal/testkit"
)

// `shop stock set SKU N` sets the product's stock, the same again changes
// nothing, and an unknown SKU or a count that is not one is refused with
// an error saying so, the stock left as it was. `shop stock split SKU N`
// spreads it over N slots, and 1 gathers it back.
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
	for range 2 {
		if out, err := shop("stock", "split", "VINYL-LTD", "4"); err != nil || out != "VINYL-LTD (Vinyl record (limited edition)): 12 on hand, 0 held by unpaid orders, 12 for sale, over 4 slots\n" {
			t.Fatalf("shop stock split VINYL-LTD 4: %q (%v)", out, err)
		}
	}
	for _, slots := range []string{"0", "65", "x"} {
		if out, err := shop("stock", "split", "VINYL-LTD", slots); err == nil || out != "" {
			t.Fatalf("shop stock split VINYL-LTD %s: %q, %v; want an error", slots, out, err)
		}
	}
	db := testkit.Open(t, env["DATABASE_URL"])
	var rows []int
	if err := db.Table("stock_slots").Order("slot").Pluck("stock", &rows).Error; err != nil || fmt.Sprint(rows) != "[3 3 3]" {
		t.Fatalf("the split's other slots hold %v (%v), want 3 each (and 3 in the product's row)", rows, err)
	}
	if _, err := shop("stock", "split", "VINYL-LTD", "1"); err != nil {
		t.Fatal(err)
	}
	if err := db.Table("stock_slots").Order("slot").Pluck("stock", &rows).Error; err != nil || fmt.Sprint(rows) != "[0 0 0]" {
		t.Fatalf("gathered into one row, the other slots hold %v (%v), want none", rows, err)
	}
	var stock int
	if err := db.Table("products").Where("sku = ?", "VINYL-LTD").Select("stock").Scan(&stock).Error; err != nil || stock != 12 {
		t.Fatalf("stock %d (%v), want 12", stock, err)
	}
}
