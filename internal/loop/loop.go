// Package loop runs work every interval until its context ends: the one
// shape of the shop's background loops. It imports no package of the shop,
// so that the middleware may use it too.
package loop

import (
	"context"
	"time"
)

// Every calls work every interval until ctx ends; the first call is one
// interval after Every begins (a loop that works at once calls work first).
func Every(ctx context.Context, interval time.Duration, work func(context.Context)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			work(ctx)
		}
	}
}
