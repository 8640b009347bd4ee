// Command soak runs two instances of the shop on PostgreSQL under mixed
// traffic — browser form posts with cookies and hidden keys, and API calls
// through the reference client — while faults come on a schedule (kill -9
// and restart, database link cuts, SIGTERM and restart, provider latency
// spikes), samples each instance's RSS every 10 s, and at the end audits
// the database and the provider's ledger. It prints a summary table and
// exits 1 on any violation.
//
//	go run ./tests/soak -duration 30m
//
// The database is -database, or TEST_DATABASE_URL: a fresh schema in it is
// made and dropped. Everything talks to 127.0.0.1 only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type config struct {
	duration, faultEvery, rssEvery time.Duration
	database                       string
	apiClients, shoppers           int
	cacheBytes, rssMargin          int64
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", 2*time.Minute, "how long the traffic runs")
	flag.DurationVar(&cfg.faultEvery, "fault-every", time.Minute, "one cycle of faults: kill -9, link cut, SIGTERM, latency spike")
	flag.DurationVar(&cfg.rssEvery, "rss-every", 10*time.Second, "how often each instance's RSS is sampled")
	flag.StringVar(&cfg.database, "database", os.Getenv("TEST_DATABASE_URL"), "PostgreSQL URL (default TEST_DATABASE_URL)")
	flag.IntVar(&cfg.apiClients, "api-clients", 4, "API clients, each a user of its own")
	flag.IntVar(&cfg.shoppers, "shoppers", 2, "browser shoppers, each a user of its own")
	flag.Int64Var(&cfg.cacheBytes, "cache-bytes", 16<<20, "IDEMPOTENCY_CACHE_BYTES of each instance")
	flag.Int64Var(&cfg.rssMargin, "rss-margin", 128<<20, "RSS allowed above IDEMPOTENCY_CACHE_BYTES")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	violations, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if len(violations) > 0 {
		fmt.Printf("\n%d VIOLATIONS:\n  %s\n", len(violations), strings.Join(violations, "\n  "))
		os.Exit(1)
	}
	fmt.Println("\nno violations")
}

// run is one soak: start, traffic and faults, settle, audit, report.
func run(ctx context.Context, cfg config) ([]string, error) {
	if !strings.HasPrefix(cfg.database, "postgres") {
		return nil, fmt.Errorf("-database (or TEST_DATABASE_URL) must be a PostgreSQL URL: two instances share it")
	}
	f, err := newFleet(cfg)
	if err != nil {
		return nil, err
	}
	defer f.close()
	traffic, err := newTraffic(f, cfg)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	done := make(chan struct{})
	go func() { f.injectFaults(runCtx, cfg.faultEvery); close(done) }()
	go f.sampleRSS(runCtx, cfg.rssEvery)
	traffic.run(runCtx)
	<-done
	ran := time.Since(started)
	if err := f.healAll(); err != nil {
		return nil, err
	}
	settled := traffic.settle(ctx)
	a, err := audit(ctx, f, traffic, cfg)
	if err != nil {
		return nil, err
	}
	report(os.Stdout, cfg, ran, f, traffic, settled, a)
	return a.violations, nil
}
