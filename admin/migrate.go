package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/shop/shop/database"
)

// migrate runs `shop migrate [up|status]`: up (the default) applies
// the pending migrations; both then list every migration, with when it was
// applied, and exit without serving.
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
