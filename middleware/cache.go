package middleware

// The replay cache: completed answers kept in this instance's memory, so
// that a replay this instance has served or produced before touches no
// database.
//
// It is safe because a completed key is immutable until it expires (a
// replay only adds to its count, kept apart; only an expired key is swept
// or claimed again). So an entry is used only until its key's expiry by the
// middleware's clock, and every instance may cache it without telling the
// others: an entry and a new operation claimed under the same key after it
// expired never meet (clocks of instances agree to well within a second, as
// leases already assume).
//
// Otter (github.com/maypok86/otter/v2) bounds the cache by a weigher, here
// the bytes an entry holds, and expires each entry at its own time;
// golang-lru's expirable LRU bounds only the number of entries and gives
// them all one lifetime.

import (
	"crypto/sha256"
	"math"
	"net/http"
	"time"

	"github.com/maypok86/otter/v2"
)

// DefaultCacheBytes is the replay cache's bound when Config.CacheBytes is 0.
const DefaultCacheBytes = 64 << 20

// entryOverhead is what an entry costs beyond the bytes it holds (the
// struct, the headers' map, the cache's node): about 750 bytes for an
// order's answer (BenchmarkCacheEntryMemory), so that the bound holds for
// the heap, not only for the weights.
const entryOverhead = 768

// cached is a completed key as a replay needs it.
type cached struct {
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

// answerOf is completed key k's answer, as a replay needs it; raw is the
// digest of a request known to have k's fingerprint.
func answerOf(k IdempotencyKey, raw [sha256.Size]byte, status int, headers http.Header, body []byte) *cached {
	return &cached{
		replayOf: replayOfKey(k), method: k.Method, route: k.Route, fingerprint: k.Fingerprint, raw: raw, expiresAt: k.ExpiresAt,
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
	if maxBytes == 0 {
		maxBytes = DefaultCacheBytes
	}
	a := &answers{now: now}
	a.c = otter.Must(&otter.Options[scopedKey, *cached]{
		MaximumWeight: uint64(maxBytes),
		Weigher:       func(_ scopedKey, v *cached) uint32 { return v.size },
		// get checks the middleware's clock too, so a test's clock is obeyed.
		ExpiryCalculator: otter.ExpiryCreatingFunc(func(e otter.Entry[scopedKey, *cached]) time.Duration {
			return e.Value.expiresAt.Sub(a.now())
		}),
	})
	return a
}

// get returns the cached answer of a key that has not expired.
func (a *answers) get(k scopedKey) (*cached, bool) {
	if a == nil {
		return nil, false
	}
	v, ok := a.c.GetIfPresent(k)
	if !ok {
		return nil, false
	}
	if !v.expiresAt.After(a.now()) {
		a.c.Invalidate(k)
		return nil, false
	}
	return v, true
}

// put caches the answer of a completed key.
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

// CacheStats is what the replay cache holds: its entries, and their weight
// in bytes (Config.CacheBytes).
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
