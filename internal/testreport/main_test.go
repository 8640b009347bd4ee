package main

import (
	"strings"
	"testing"
)

// A run where one test passes, one is skipped and one fails: the failed
// test's output is printed, the passing one's is not, and the skip is kept
// with its reason, without the file:line prefix.
func TestReadKeepsSkipsAndFailures(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestPass"}`,
		`{"Action":"output","Package":"p","Test":"TestPass","Output":"=== RUN   TestPass\n"}`,
		`{"Action":"output","Package":"p","Test":"TestPass","Output":"    x_test.go:3: quiet\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestPass"}`,
		`{"Action":"output","Package":"p","Test":"TestSkip","Output":"    x_test.go:9: Chromium is not installed (apt-get install chromium)\n"}`,
		`{"Action":"output","Package":"p","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestSkip"}`,
		`{"Action":"output","Package":"p","Test":"TestFail","Output":"    x_test.go:12: 2 orders, want 1\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestFail"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t0.01s\n"}`,
		`{"Action":"pass","Package":"q"}`,
	}, "\n")
	var out strings.Builder
	r := read(strings.NewReader(in), &out)
	if !r.failed || r.passed != 1 {
		t.Fatalf("failed %v, passed %d; want true, 1", r.failed, r.passed)
	}
	want := []string{"p TestSkip: Chromium is not installed (apt-get install chromium)"}
	if len(r.skipped) != 1 || r.skipped[0] != want[0] {
		t.Fatalf("skipped %q, want %q", r.skipped, want)
	}
	printed := out.String()
	if !strings.Contains(printed, "2 orders, want 1") || strings.Contains(printed, "quiet") ||
		!strings.Contains(printed, "ok  \tq") || !strings.Contains(printed, "FAIL\tp") {
		t.Fatalf("printed:\n%s", printed)
	}
}
