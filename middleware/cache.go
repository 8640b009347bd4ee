package middleware

// The replay cache: completed answers in memory, so that a replay seen here touches no database.
// Safe: a completed key never changes until it expires, and an entry is used only until then by
// the middleware's clock (clocks agree within a second, as leases assume).

import (
	"cmp"
	"crypto/sha256"
	"math"
	"net/http"
	"time"

	"github.com/maypok86/otter/v2"
)

// DefaultCacheBytes is the replay cache's bound when Config.CacheBytes is 0.
const DefaultCacheBytes = 64 << 20

// entryOverhead is an entry's heap cost beyond its bytes (BenchmarkCacheEntryMemory).
const entryOverhead = 768

type cached struct {
	scopedKey
	replayOf      // whose replay count a replay adds to
	method, route string
	fingerprint   string
	raw           [sha256.Size]byte // raw digest of a request known to have this fingerprint
	expiresAt     time.Time
	status        int
	headers       http.Header // never modified once cached: send copies it
	body          []byte
	size          uint32
}

func answerOf(k IdempotencyKey, raw [sha256.Size]byte, status int, headers http.Header, body []byte) *cached {
	return &cached{
		scopedKey: scopedKey{k.Scope, k.Key}, replayOf: replayOfKey(k), method: k.Method, route: k.Route, fingerprint: k.Fingerprint, raw: raw, expiresAt: k.ExpiresAt,
		status: status, headers: headers, body: body,
	}
}

// answers is the replay cache; nil when Config.CacheBytes is negative.
type answers struct {
	c   *otter.Cache[scopedKey, *cached]
	now func() time.Time
}

func newAnswers(maxBytes int64, now func() time.Time) *answers {
	if maxBytes < 0 {
		return nil
	}
	a := &answers{now: now}
	a.c = otter.Must(&otter.Options[scopedKey, *cached]{
		MaximumWeight: uint64(cmp.Or(maxBytes, DefaultCacheBytes)),
		Weigher:       func(_ scopedKey, v *cached) uint32 { return v.size },
		// get checks the middleware's clock too, so a test's clock is obeyed.
		ExpiryCalculator: otter.ExpiryCreatingFunc(func(e otter.Entry[scopedKey, *cached]) time.Duration {
			return e.Value.expiresAt.Sub(a.now())
		}),
	})
	return a
}

func (a *answers) get(k scopedKey) (*cached, bool) {
	if a == nil {
		return nil, false
	}
	v, ok := a.c.GetIfPresent(k)
	if ok && !v.expiresAt.After(a.now()) {
		a.c.Invalidate(k)
		return nil, false
	}
	return v, ok
}

func (a *answers) put(v *cached) {
	if a == nil || !v.expiresAt.After(a.now()) {
		return
	}
	k := scopedKey{v.scope, v.key}
	size := entryOverhead + len(k.scope) + len(k.key) + len(v.operationID) + len(v.method) + len(v.route) + len(v.fingerprint) + len(v.body)
	for name, values := range v.headers {
		size += len(name)
		for _, value := range values {
			size += len(value)
		}
	}
	v.size = uint32(min(size, math.MaxUint32))
	a.c.Set(k, v)
}

// CacheStats is what the replay cache holds: entries, and their bytes.
type CacheStats struct {
	Entries int
	Bytes   uint64
}

// CacheStats reports what the replay cache holds now.
func (m *Idempotency) CacheStats() CacheStats {
	if m.answers == nil {
		return CacheStats{}
	}
	return CacheStats{Entries: m.answers.c.EstimatedSize(), Bytes: m.answers.c.WeightedSize()}
}
