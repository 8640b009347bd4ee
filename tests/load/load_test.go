package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
)

// The harness, tiny: every phase does some work, in two interleaved rounds,
// and the exactly-once audit it reads back from the database holds.
func TestLoadSmoke(t *testing.T) {
	cfg := config{DatabaseURL: testkit.URL(t), Phase: 300 * time.Millisecond, Ops: 12, Workers: 2, StormK: 3, Rounds: 2, MemoryOps: 150}
	rep, err := measure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, name := range reported {
		if rep.phases[name].ops == 0 {
			t.Errorf("phase %q did nothing:\n%s", name, out.String())
		}
	}
	if problems := rep.audit.problems(); len(problems) > 0 {
		t.Errorf("audit: %v\n%s", problems, out.String())
	}
	md := rep.markdown("SQLite")
	if rep.memory.completed < int64(cfg.MemoryOps) || !strings.Contains(md, "| other instance (answers pushed on PostgreSQL) |") {
		t.Errorf("memory: %d operations completed, want %d, and the caches reported:\n%s", rep.memory.completed, cfg.MemoryOps, md)
	}
	for _, r := range ratios {
		if !strings.Contains(md, "| "+r.what+" |") {
			t.Errorf("the Markdown lacks the ratio %q:\n%s", r.what, md)
		}
	}
}
