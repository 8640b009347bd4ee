//go:build notifycrash

package notify

import (
	"os"
	"syscall"
)

// afterSend, built only with -tags notifycrash for the tests: with
// NOTIFY_CRASH_AFTER_SEND set, the process kills itself (SIGKILL, nothing
// deferred runs) once a receipt is sent and before it is recorded.
// TestAReceiptResentAfterAKillIsTheSameMessage restarts it and sees the
// resend carry the same Message-ID.
func afterSend(string) {
	if os.Getenv("NOTIFY_CRASH_AFTER_SEND") != "" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}
