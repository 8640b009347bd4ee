// Package database opens the shop's database (SQLite with group commit, or
// PostgreSQL), migrates it, and pages its reads.
package database

import (
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

type Options struct {
	// GroupCommit is the most transactions one SQLite commit holds
	// (SQLITE_GROUP_COMMIT); 0 or 1, each its own. PostgreSQL ignores it.
	GroupCommit int
}

// Open connects to a postgres:// or postgresql:// URL, or an SQLite file's
// path (a "sqlite:" or "file:" prefix is optional).
func Open(databaseURL string, o Options) (*gorm.DB, error) {
	cfg := &gorm.Config{
		TranslateError: true,
		Logger:         logger.Discard,
		NowFunc:        func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
	}
	if err := CheckURL(databaseURL); err != nil {
		return nil, err
	}
	if !isPostgresURL(databaseURL) {
		return openSQLite(sqlitePath(databaseURL), cfg, max(o.GroupCommit, 1))
	}
	db, err := gorm.Open(postgres.Open(databaseURL), cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := registerBatch(db); err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(20)
	sqlDB.SetMaxIdleConns(20)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// connectWriter connects the writer, which switches the file to WAL mode.
// The switch takes the file alone and SQLite answers busy at once, without
// its busy handler, when another process opens or migrates the same new file
// at that moment (two instances started together): tried again until the
// busy timeout.
func connectWriter(writer *sql.DB) error {
	deadline := time.Now().Add(sqliteBusyTimeout)
	for {
		err := writer.Ping()
		var busy sqlite3.Error
		if err == nil || !errors.As(err, &busy) || busy.Code != sqlite3.ErrBusy || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sqliteDriver is mattn's driver with SQLite's temporary files in memory on
// every connection (the DSN has no setting for it). Each transaction of a
// group commit is a savepoint, which keeps the pages it changes in a
// sub-journal: on disk, past 64 KiB, a write syscall for each page; in
// memory, a copy: about a quarter more fresh orders a second on SQLite in
// the load harness (scripts/bench's prose in BENCHMARKS.md).
const sqliteDriver = "sqlite3-shop"

var registerSQLite = sync.OnceFunc(func() {
	sql.Register(sqliteDriver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec("PRAGMA temp_store = MEMORY", nil)
		return err
	}})
})

// openSQLite opens the file in WAL mode as sqlitePools: one writer, whose
// transactions begin IMMEDIATE, and a pool of query-only readers.
func openSQLite(path string, cfg *gorm.Config, groupCommit int) (*gorm.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	q := url.Values{}
	q.Set("_busy_timeout", strconv.Itoa(int(sqliteBusyTimeout/time.Millisecond)))
	q.Set("_stmt_cache_size", "64")
	w := maps.Clone(q)
	w.Set("_journal_mode", "WAL")
	w.Set("_txlock", "immediate")
	w.Set("_foreign_keys", "1")
	// FULL: with NORMAL, a power loss could undo an order a client was told about.
	w.Set("_synchronous", "FULL")
	q.Set("_query_only", "1")
	// sql.Open of a registered driver does not fail: it connects on first use.
	pools := &sqlitePools{}
	registerSQLite()
	pools.writer, _ = sql.Open(sqliteDriver, "file:"+path+"?"+w.Encode())
	pools.writer.SetMaxOpenConns(1)
	pools.writer.SetMaxIdleConns(1)
	pools.writer.SetConnMaxIdleTime(0)
	pools.group = &groupCommitter{writer: pools.writer, max: groupCommit}
	pools.readers, _ = sql.Open(sqliteDriver, "file:"+path+"?"+q.Encode())
	// Not database/sql's two: the rest were reopened, pragmas and all, under load.
	pools.readers.SetMaxIdleConns(20)
	pools.readers.SetConnMaxIdleTime(5 * time.Minute)
	// The writer connects first, so the file is in WAL mode before a reader opens it.
	err := connectWriter(pools.writer)
	var db *gorm.DB
	if err == nil {
		db, err = gorm.Open(sqlite.New(sqlite.Config{Conn: pools}), cfg)
	}
	if err == nil {
		err = registerBatch(db)
	}
	if err != nil {
		pools.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// CommitStats is SQLite's COMMITs and the transactions committed in them;
// zeros on PostgreSQL.
func CommitStats(db *gorm.DB) (commits, operations uint64) {
	if pools, ok := db.ConnPool.(*sqlitePools); ok {
		return pools.group.commits.Load(), pools.group.operations.Load()
	}
	return 0, 0
}

// Close closes what Open opened: on SQLite, both pools.
func Close(db *gorm.DB) error {
	if pools, ok := db.ConnPool.(*sqlitePools); ok {
		return pools.Close()
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// CheckURL reports why Open would refuse a URL before connecting: an
// unknown scheme, or no SQLite path.
func CheckURL(databaseURL string) error {
	scheme, _, hasScheme := strings.Cut(databaseURL, "://")
	switch {
	case isPostgresURL(databaseURL):
		return nil
	case hasScheme:
		return fmt.Errorf("DATABASE_URL: unknown database scheme %q (use postgres://… or an SQLite file path)", scheme)
	case sqlitePath(databaseURL) == "":
		return errors.New("DATABASE_URL: empty SQLite path")
	}
	return nil
}

func isPostgresURL(databaseURL string) bool {
	return strings.HasPrefix(databaseURL, "postgres://") || strings.HasPrefix(databaseURL, "postgresql://")
}

func sqlitePath(databaseURL string) string {
	return strings.TrimPrefix(strings.TrimPrefix(databaseURL, "sqlite:"), "file:")
}

func IsPostgres(db *gorm.DB) bool { return db.Dialector.Name() == "postgres" }
