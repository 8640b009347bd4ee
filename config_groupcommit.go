package main

import (
	"fmt"
	"strconv"

	"github.com/shop/shop/database"
)

// groupCommitConfig is how many SQLite transactions may share one COMMIT
// (models.Options.GroupCommit).
type groupCommitConfig struct {
	GroupCommit int
}

// loadGroupCommit reads SQLITE_GROUP_COMMIT: a whole number from 1 (each
// transaction its own commit) to 1000; models.DefaultGroupCommit when unset.
func (cfg *groupCommitConfig) loadGroupCommit(getenv func(string) string) []error {
	raw := withDefault(getenv("SQLITE_GROUP_COMMIT"), strconv.Itoa(database.DefaultGroupCommit))
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 1000 {
		return []error{fmt.Errorf("SQLITE_GROUP_COMMIT=%q: want a whole number from 1 to 1000, the most transactions one SQLite commit holds (1: each its own)", raw)}
	}
	cfg.GroupCommit = n
	return nil
}
