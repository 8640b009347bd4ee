package outbox

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Backoff is the wait after the n-th failure in a row (n ≥ 1): first,
// doubling each time up to ceiling, of which the upper half is random, so
// that the many who failed together do not come back together. The relay's
// retries, the webhook sender's and the broker's reconnects all wait so.
func Backoff(n int, first, ceiling time.Duration) time.Duration {
	d := ceiling
	if n >= 1 && n < 40 && first<<(n-1) > 0 && first<<(n-1) < ceiling {
		d = first << (n - 1)
	}
	return d/2 + rand.N(d/2+1)
}

// ErrUnavailable is what a consumer answers when nothing can go through
// now, whatever the event (its broker is away): the relay hands it the
// same events again once it is back, and counts no attempt against them.
var ErrUnavailable = errors.New("the consumer is unavailable")
