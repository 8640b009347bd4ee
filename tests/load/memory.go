package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/shop/shop/middleware"
)

// memory is what the instances held after the memory phase: the replay
// cache of each instance with the middleware (by the weights that bound
// it), and the harness process as a whole — every instance of the shop,
// their connection pools and the client — after a garbage collection.
type memory struct {
	completed     int64
	bound         int64 // IDEMPOTENCY_CACHE_BYTES in effect
	caches        []cacheOf
	before, after uint64 // live heap after a collection, before and after the memory phase
	rss           uint64 // resident set of the process, after
}

type cacheOf struct {
	instance string
	stats    middleware.CacheStats
}

func (m *memory) measure(b *bench) {
	m.completed = b.completed.Load()
	m.bound = b.deps.ReplayCacheBytes
	m.caches = []cacheOf{
		{"with middleware (made the answers)", b.once.server.ReplayCache()},
		{"other instance (answers pushed on PostgreSQL)", b.other.server.ReplayCache()},
		{"cold instance (no pushes)", b.cold.server.ReplayCache()},
	}
	m.after = heapAfterGC()
	m.rss = residentBytes()
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// residentBytes is VmRSS from /proc/self/status; 0 where there is none.
func residentBytes() uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func (m memory) markdown(sb *strings.Builder) {
	if m.completed == 0 {
		return
	}
	fmt.Fprintf(sb, "Memory after %d operations completed by the instance with the middleware (IDEMPOTENCY_CACHE_BYTES %s):\n\n", m.completed, mib(uint64(m.bound)))
	sb.WriteString("| replay cache | entries | bytes (as weighed) | bytes per entry | within the bound |\n|---|--:|--:|--:|---|\n")
	for _, c := range m.caches {
		per := uint64(0)
		if c.stats.Entries > 0 {
			per = c.stats.Bytes / uint64(c.stats.Entries)
		}
		within := "yes"
		if c.stats.Bytes > uint64(m.bound) {
			within = "NO"
		}
		fmt.Fprintf(sb, "| %s | %d | %s | %d | %s |\n", c.instance, c.stats.Entries, mib(c.stats.Bytes), per, within)
	}
	fmt.Fprintf(sb, "\nThe harness process (five instances of the shop, their pools and the client), after a collection: live heap %s before the memory phase, %s after; resident set %s.\n\n",
		mib(m.before), mib(m.after), mib(m.rss))
}
