//go:build outboxpause

package outbox

import (
	"fmt"
	"os"
)

// pause, built only with -tags outboxpause for the kill -9 tests, stops
// the relay for good at the point OUTBOX_PAUSE names, after saying so on
// stderr, so that the test kills the process there.
func pause(point, eventID string) {
	if os.Getenv("OUTBOX_PAUSE") != point {
		return
	}
	fmt.Fprintf(os.Stderr, "outbox paused at %s of %s\n", point, eventID)
	select {}
}
