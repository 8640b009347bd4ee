package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/shop/shop/orders"
)

// stockUsage is what `shop stock` answers a command it does not know.
const stockUsage = "usage: shop stock set SKU UNITS"

// stock runs `shop stock set SKU UNITS`: the product's units on hand
// become UNITS, staff's count, whatever they were; setting it again changes
// nothing. Deliveries and write-offs, which add and take off, go through the
// console, whose idempotency key counts a retried one once. The database is
// migrated and seeded first, as for serving, so it works on a fresh shop
// too.
func stock(ctx context.Context, dbs Databases, args []string, stdout io.Writer) error {
	if len(args) != 3 || args[0] != "set" {
		return errors.New(stockUsage)
	}
	units, err := strconv.Atoi(args[2])
	if err != nil || units < 0 {
		return fmt.Errorf("stock set: UNITS must be a whole number, 0 or more, not %q (%s)", args[2], stockUsage)
	}
	db, closeDB, err := dbs.Prepare()
	if err != nil {
		return err
	}
	defer closeDB()
	p, err := orders.Store{DB: db}.SetStock(ctx, args[1], units)
	if errors.Is(err, orders.ErrUnknownSKU) {
		return fmt.Errorf("stock set: %w (see GET /api/v1/products for the SKUs)", err)
	}
	if err != nil {
		return fmt.Errorf("stock set: %w", err)
	}
	fmt.Fprintf(stdout, "%s (%s): %d on hand, %d held by unpaid orders, %d for sale\n", p.SKU, p.Name, p.OnHand(), p.Held, p.Stock)
	return nil
}
