//go:build notifycrash

package notify

import (
	"os"
	"syscall"
)

// A fault for the tests alone, built only with -tags notifycrash: with
// NOTIFY_CRASH_AFTER_SEND set, the process kills itself (SIGKILL, nothing
// deferred runs) once a receipt is sent and before it is recorded.
// TestAReceiptResentAfterAKillIsTheSameMessage restarts it and sees the
// resend carry the same Message-ID.
func init() {
	if os.Getenv("NOTIFY_CRASH_AFTER_SEND") != "" {
		afterSend = func(string) { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
}
