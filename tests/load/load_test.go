package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
)

// The harness, tiny: every phase runs, and the exactly-once audit it reads
// back from the database holds (run fails when it does not).
func TestLoadSmoke(t *testing.T) {
	var out bytes.Buffer
	cfg := config{DatabaseURL: testkit.URL(t), Phase: 300 * time.Millisecond, Ops: 12, Workers: 2, StormK: 3}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{phaseFresh, phasePlain, phaseBareSQL, phaseReplay, phaseStorm, phasePay, "replays counted on the keys"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "FAIL") {
		t.Errorf("audit:\n%s", out.String())
	}
}
