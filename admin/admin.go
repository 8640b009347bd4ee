// Package admin runs the operator's subcommands: migrate, stock set and staff add|remove.
package admin

import (
	"context"
	"io"
	"slices"

	"gorm.io/gorm"
)

// Usage lists the subcommands, one a line, as `shop help` shows them.
const Usage = `  migrate [up|status]     apply the pending migrations (up, the default) and list them all
  stock set SKU UNITS     set a product's units on hand to UNITS, as counted
  staff add|remove EMAIL  make a user staff, or a shopper again`

// Is reports whether name is one of the subcommands.
func Is(name string) bool { return slices.Contains([]string{"migrate", "stock", "staff"}, name) }

// Run runs the subcommand args[0] with its arguments, and exits without
// serving. open opens the database as configured; prepare opens it
// migrated and seeded, as serving does: stock set needs the catalog.
func Run(ctx context.Context, open func() (*gorm.DB, error), prepare func() (*gorm.DB, func(), error), args []string, stdout io.Writer) error {
	switch args[0] {
	case "migrate":
		return migrate(ctx, open, args[1:], stdout)
	case "stock":
		return stock(ctx, prepare, args[1:], stdout)
	default:
		return staff(ctx, open, args[1:], stdout)
	}
}
