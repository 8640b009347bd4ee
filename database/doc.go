// Package database opens the shop's database and keeps it: SQLite's one
// writer, its readers and group commit, or a PostgreSQL pool; the schema's
// migrations; and keyset paging.
package database
