// Package admin runs the operator's subcommands: migrate, stock set|split and staff add|remove.
package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

// Usage lists the subcommands, one a line, as `shop help` shows them.
const Usage = `  migrate [up|status]     apply the pending migrations (up, the default) and list them all
  stock set SKU UNITS     set a product's units on hand to UNITS, as counted
  stock split SKU SLOTS   spread a product's stock over SLOTS rows for a flash sale (1: one row)
  staff add|remove EMAIL  make a user staff, or a shopper again`

// Databases opens the database as configured: Open as it is, Prepare
// migrated and seeded, as serving does (stock set needs the catalog).
type Databases struct {
	Open    func() (*gorm.DB, error)
	Prepare func() (*gorm.DB, func(), error)
}

// commands are the subcommands, by name.
var commands = map[string]func(context.Context, Databases, []string, io.Writer) error{
	"migrate": migrate, "stock": stock, "staff": staff,
}

// Is reports whether name is one of the subcommands.
func Is(name string) bool { return commands[name] != nil }

// Run runs the subcommand args[0] with its arguments, without serving.
func Run(ctx context.Context, dbs Databases, args []string, stdout io.Writer) error {
	return commands[args[0]](ctx, dbs, args[1:], stdout)
}

// migrate runs `shop migrate [up|status]`: up (the default) applies the
// pending migrations; both then list every migration, with when it was applied.
func migrate(ctx context.Context, dbs Databases, args []string, stdout io.Writer) error {
	verb := "up"
	if len(args) > 0 {
		verb = args[0]
	}
	if len(args) > 1 || verb != "up" && verb != "status" {
		return errors.New("usage: shop migrate [up|status]")
	}
	db, err := dbs.Open()
	if err != nil {
		return err
	}
	defer database.Close(db)
	if verb == "up" {
		if err := database.Migrate(db); err != nil {
			return err
		}
	}
	migrations, err := database.MigrationStatus(ctx, db)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	for _, m := range migrations {
		applied := "pending"
		if m.State == goose.StateApplied {
			applied = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "%05d  %-28s  %s\n", m.Source.Version, applied, m.Source.Path)
	}
	return nil
}

// staff runs `shop staff add|remove EMAIL`, idempotent, for an existing
// user: the only way anyone becomes staff, since nothing on the web does it.
func staff(ctx context.Context, dbs Databases, args []string, stdout io.Writer) error {
	roles := map[string]models.Role{"add": models.Staff, "remove": models.Shopper}
	if len(args) != 2 || roles[args[0]] == "" {
		return errors.New("usage: shop staff add|remove EMAIL")
	}
	db, closeDB, err := dbs.Prepare()
	if err != nil {
		return err
	}
	defer closeDB()
	role := roles[args[0]]
	changed, err := accounts.SetRole(ctx, db, args[1], role)
	if err != nil {
		return err
	}
	already := ""
	if !changed {
		already = " already"
	}
	fmt.Fprintf(stdout, "%s is%s %s\n", args[1], already, role)
	return nil
}

// stockUsage is what `shop stock` answers a command it does not know.
const stockUsage = "usage: shop stock set SKU UNITS | shop stock split SKU SLOTS"

// stock runs `shop stock set SKU UNITS`: units on hand become staff's count,
// so setting it again changes nothing (deliveries and write-offs, which add
// and take off, go through the console, under an idempotency key); and
// `shop stock split SKU SLOTS`, as idempotent.
func stock(ctx context.Context, dbs Databases, args []string, stdout io.Writer) error {
	if len(args) != 3 || args[0] != "set" && args[0] != "split" {
		return errors.New(stockUsage)
	}
	n, err := strconv.Atoi(args[2])
	switch {
	case args[0] == "set" && (err != nil || n < 0):
		return fmt.Errorf("stock set: UNITS must be a whole number, 0 or more, not %q (%s)", args[2], stockUsage)
	case err != nil: // split: SplitStock says which numbers of slots it takes
		return fmt.Errorf("stock split: SLOTS must be a whole number, not %q (%s)", args[2], stockUsage)
	}
	db, closeDB, err := dbs.Prepare()
	if err != nil {
		return err
	}
	defer closeDB()
	store := orders.Store{DB: db}
	change := store.SetStock
	if args[0] == "split" {
		change = store.SplitStock
	}
	p, err := change(ctx, args[1], n)
	if errors.Is(err, orders.ErrUnknownSKU) {
		return fmt.Errorf("stock %s: %w (see GET /api/v1/products for the SKUs)", args[0], err)
	}
	if err != nil {
		return fmt.Errorf("stock %s: %w", args[0], err)
	}
	said := fmt.Sprintf("%s (%s): %d on hand, %d held by unpaid orders, %d for sale", p.SKU, p.Name, p.OnHand(), p.Held, p.Stock)
	if args[0] == "split" {
		said += fmt.Sprintf(", over %d slots", p.StockSlots)
	}
	fmt.Fprintln(stdout, said)
	return nil
}
