package handlers

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/shop/shop/problem"
)

// addressLimits throttles the credential endpoints (sign-up and log-in,
// each a deliberately slow bcrypt) per client address: a token bucket per
// address, of perMinute tokens refilled over a minute.
type addressLimits struct {
	perMinute int
	mu        sync.Mutex
	buckets   map[string]*bucket
}

type bucket struct {
	limiter *rate.Limiter
	seen    time.Time
}

// maxTrackedAddresses is how many addresses are kept before those idle for
// a full refill (whose buckets are full again, so nothing is lost) are
// forgotten: the map cannot grow without bound.
const maxTrackedAddresses = 10_000

func newAddressLimits(perMinute int) *addressLimits {
	return &addressLimits{perMinute: perMinute, buckets: map[string]*bucket{}}
}

// take spends a token of addr's bucket; when there is none, it reports how
// long until there is.
func (l *addressLimits) take(addr string, now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[addr]
	if b == nil {
		if len(l.buckets) >= maxTrackedAddresses {
			for a, old := range l.buckets {
				if now.Sub(old.seen) >= time.Minute {
					delete(l.buckets, a)
				}
			}
		}
		b = &bucket{limiter: rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), l.perMinute)}
		l.buckets[addr] = b
	}
	b.seen = now
	r := b.limiter.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return false, wait
	}
	return true, 0
}

// throttleAddress refuses a credential request from an address that sent
// too many lately: 429 with Retry-After, a page for the browser. The
// address is the connection's peer, never a header the client chooses.
func (s *Server) throttleAddress(c *gin.Context) {
	if s.addresses == nil {
		return
	}
	if ok, wait := s.addresses.take(c.RemoteIP(), time.Now()); !ok {
		p := problem.TooManyRequests.With(fmt.Sprintf("Too many sign-ups or log-ins from your address: try again in %s.", wait.Round(time.Second)))
		p.RetryAfter = max(1, int(math.Ceil(wait.Seconds())))
		s.render(c, p)
		c.Abort()
	}
}
