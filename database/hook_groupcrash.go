//go:build groupcrash

package database

import (
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// A fault for the tests alone, built only with -tags groupcrash: with
// GROUP_COMMIT_CRASH_AT=N set, the process kills itself (SIGKILL, nothing
// deferred runs) just before the Nth shared COMMIT that holds two or more
// transactions: a crash in the middle of a batch, every member's writes
// made and none on disk. TestKill9DuringAGroupCommitKeepsEveryAnsweredOrderWhole
// restarts it and finds every order that was answered.
var crashAt, _ = strconv.Atoi(os.Getenv("GROUP_COMMIT_CRASH_AT"))

var sharedCommits atomic.Int64

func beforeCommit(committed int) {
	if crashAt >= 1 && committed >= 2 && sharedCommits.Add(1) == int64(crashAt) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}
