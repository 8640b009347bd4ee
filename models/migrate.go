package models

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/gorm"
)

// migrations holds the schema's versioned migrations, one directory per
// engine, in the order goose applies them (00001_…, 00002_…).
//
//go:embed migrations
var migrations embed.FS

// Migrate applies the migrations the database has not had, and records
// them in goose's version table. On PostgreSQL it holds the migration lock,
// so that instances starting together migrate one after the other.
//
// SQLite has no lock that spans goose's transactions: an instance that
// loses a race on a fresh file (the version table, or a migration, made
// by another meanwhile) tries again, and finds the work done.
func Migrate(db *gorm.DB) error {
	p, err := migrator(db)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		_, err = p.Up(context.Background())
		if err == nil || IsPostgres(db) || attempt == 3 {
			break
		}
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

// migrator is goose's provider for the database's engine, on the pool GORM
// writes with.
func migrator(db *gorm.DB) (*goose.Provider, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	dialect, dir := goose.DialectSQLite3, "migrations/sqlite3"
	var opts []goose.ProviderOption
	if IsPostgres(db) {
		dialect, dir = goose.DialectPostgres, "migrations/postgres"
		// Tried every second, for up to ten minutes: the lock is held for as
		// long as another instance's migrations take.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLock), lock.WithLockTimeout(1, 600))
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(dialect, sqlDB, fsys, opts...)
}

// migrationLock is the advisory lock id of schema migrations: the one the
// release before goose took, so an instance of it and one of this release
// never migrate at once.
const migrationLock = 7243190515
