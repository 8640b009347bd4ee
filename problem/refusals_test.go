package problem

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The middleware's refusals are the shop's problem types of the same slug,
// status and title, written once, in middleware.Refusals: refusals_gen.go
// is generated from them (go generate ./problem), not written by hand.
func TestRefusalsAreTheMiddlewares(t *testing.T) {
	want, err := exec.Command("go", "run", "gen_refusals.go", "-stdout").Output()
	if err != nil {
		t.Fatalf("go run gen_refusals.go: %v", err)
	}
	got, err := os.ReadFile("refusals_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("refusals_gen.go is not middleware/refusal.go's refusals: run go generate ./problem\n got:\n%s\nwant:\n%s", got, want)
	}
	if n := strings.Count(string(want), "Type{"); n < 9 {
		t.Errorf("only %d refusals read from the middleware", n)
	}
}
