package database

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"
)

// migrations holds the schema's versioned migrations, one directory per engine.
//
//go:embed migrations
var migrations embed.FS

// Migrate applies the migrations the database has not had. On PostgreSQL
// it holds the migration lock, so instances starting together take turns.
func Migrate(db *gorm.DB) error {
	p, err := migrator(db)
	if err != nil {
		return err
	}
	_, err = p.Up(context.Background())
	if err != nil && !IsPostgres(db) {
		// SQLite has no lock across goose's read of the versions: an instance
		// that lost the race to apply a migration tries again, and finds it applied.
		_, err = p.Up(context.Background())
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// MigrationStatus lists every migration, applied or pending.
func MigrationStatus(ctx context.Context, db *gorm.DB) ([]*goose.MigrationStatus, error) {
	p, err := migrator(db)
	if err != nil {
		return nil, err
	}
	return p.Status(ctx)
}

// migrator is goose's provider for the database's engine, on GORM's writer pool.
func migrator(db *gorm.DB) (*goose.Provider, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	dialect, dir := goose.DialectSQLite3, "migrations/sqlite3"
	var opts []goose.ProviderOption
	if IsPostgres(db) {
		dialect, dir = goose.DialectPostgres, "migrations/postgres"
		opts = append(opts, goose.WithSessionLocker(migrationLock{}))
	}
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(dialect, sqlDB, fsys, opts...)
}

// migrationLock is the advisory lock the release before took to migrate: it
// waits, where goose's own locker polls a second at a time, slow for tests.
type migrationLock struct{}

const migrationLockID = 7243190515

func (migrationLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	return advisory(ctx, conn, "pg_advisory_lock")
}

func (migrationLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	return advisory(ctx, conn, "pg_advisory_unlock")
}

func advisory(ctx context.Context, conn *sql.Conn, call string) error {
	_, err := conn.ExecContext(ctx, "SELECT "+call+"($1)", migrationLockID)
	return err
}
