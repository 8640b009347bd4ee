// Package database opens the shop's database (SQLite with group commit, or
// PostgreSQL), migrates it, and pages its reads.
package database
