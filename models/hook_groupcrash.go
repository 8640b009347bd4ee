//go:build groupcrash

package models

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
func init() {
	n, err := strconv.Atoi(os.Getenv("GROUP_COMMIT_CRASH_AT"))
	if err != nil || n < 1 {
		return
	}
	var shared atomic.Int64
	beforeCommit = func(committed int) {
		if committed >= 2 && shared.Add(1) == int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
}
