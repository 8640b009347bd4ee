package client

import (
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// fullJitter is capped exponential backoff with full jitter: the n-th wait
// is drawn uniformly from [0, min(Max, Initial·2ⁿ)], so that clients
// failed by one outage do not come back in step.
type fullJitter struct {
	ceiling *backoff.ExponentialBackOff
}

func newFullJitter(p Policy) *fullJitter {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = p.Initial, p.Max
	b.Multiplier, b.RandomizationFactor = 2, 0
	return &fullJitter{ceiling: b}
}

func (j *fullJitter) NextBackOff() time.Duration {
	return rand.N(max(j.ceiling.NextBackOff(), 0) + 1)
}

func (j *fullJitter) Reset() { j.ceiling.Reset() }
