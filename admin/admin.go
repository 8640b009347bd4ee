// Package admin runs the operator's subcommands: migrate, stock set and staff add|remove.
package admin

import (
	"context"
	"io"

	"gorm.io/gorm"
)

// Usage lists the subcommands, one a line, as `shop help` shows them.
const Usage = `  migrate [up|status]     apply the pending migrations (up, the default) and list them all
  stock set SKU UNITS     set a product's units on hand to UNITS, as counted
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

// Run runs the subcommand args[0] with its arguments, and exits without
// serving.
func Run(ctx context.Context, dbs Databases, args []string, stdout io.Writer) error {
	return commands[args[0]](ctx, dbs, args[1:], stdout)
}
