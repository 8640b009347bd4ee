//go:build unfencedclaim

package tests

import (
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shop/shop/internal/testkit"
)

// The planted bug: a server built with -tags unfencedclaim claims a key
// whatever its state, so two requests with one key can both run. The
// checker of TestHistoriesAreLinearizable must find its history illegal,
// and draw it. Run on its own, with the tag: see .ci/run.
func TestLinearizabilityCatchesAnUnfencedClaim(t *testing.T) {
	binary, err := testkit.Build(t.TempDir(), raceEnabled, "unfencedclaim")
	if err != nil {
		t.Fatal(err)
	}
	h := linearizabilityRun{duration: 10 * time.Second, noFaults: true}.record(t, binary)
	result, info := porcupine.CheckOperationsVerbose(contractModel, h.ops, 2*time.Minute)
	if result != porcupine.Illegal {
		t.Fatalf("%d operations over %d orders from a server without the claim's fence: porcupine says %s, want Illegal", h.requests, h.slots, result)
	}
	path := visualize(t, contractModel, info)
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("no drawing of the illegal history at %s: %v", path, err)
	}
	audit, err := testkit.AuditMoney(h.e.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations over %d orders: Illegal, as it must be; drawn in %s. The tables agree: %d orders made for %d order keys",
		h.requests, h.slots, path, audit.Orders, h.slots)
}
