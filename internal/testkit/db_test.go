package testkit_test

import (
	"testing"

	"github.com/shop/shop/config"
	"github.com/shop/shop/internal/testkit"
)

// The tests' group commit is the configuration's default, written in the
// config table.
func TestGroupCommitIsTheConfigDefault(t *testing.T) {
	if want := config.Default().GroupCommit; testkit.GroupCommit != want {
		t.Fatalf("testkit.GroupCommit = %d, want SQLITE_GROUP_COMMIT's default %d", testkit.GroupCommit, want)
	}
}
