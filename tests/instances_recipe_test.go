package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
)

// The two-instance recipe of docs/operations.md ("Running N instances")
// runs as printed, from the repository's root — only its ports are free
// ones and its database a fresh one (PostgreSQL, or on the SQLite pass one
// file that both processes share) — and the retry on the second instance
// is the first one's answer, replayed: one order, and the second's trace
// says where it found it (from memory, pushed by the first, on PostgreSQL).
// `kill $pids` then stops both.
func TestOperationsTwoInstancesRecipe(t *testing.T) {
	needShellTools(t, "openssl")
	recipe := operationsBlock(t, "**Two instances on one machine, and a retry on the other.**")
	const database = "postgres://postgres@127.0.0.1:5432/shop?sslmode=disable"
	if strings.Count(recipe, "'"+database+"'") != 1 || strings.Count(recipe, "8081") != 3 || strings.Count(recipe, "8082") != 4 {
		t.Fatalf("the recipe does not start two instances, on ports 8081 and 8082 of %s:\n%s", database, recipe)
	}
	dbURL := testkit.URL(t)
	portA, portB := freePort(t), freePort(t)
	keepOnlyWhatWasThere(t, "../data", "../data/shop")
	logA, logB := "../data/instance-"+portA+".log", "../data/instance-"+portB+".log"
	t.Cleanup(func() { os.Remove(logA); os.Remove(logB) })

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // go build may compile SQLite
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.NewReplacer(database, dbURL, "8081", portA, "8082", portB).Replace(recipe))
	cmd.Dir = ".."
	ownGroup(cmd)
	cmd.Cancel = func() error { killGroup(cmd); return nil }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() { killGroup(cmd) })
	err := cmd.Run()
	logs := func() string {
		a, _ := os.ReadFile(logA)
		b, _ := os.ReadFile(logB)
		return "A:\n" + string(a) + "B:\n" + string(b)
	}
	if err != nil {
		t.Fatalf("the recipe failed: %v\n%s\n%s\n%s", err, stdout.String(), stderr.String(), logs())
	}
	printed := strings.TrimSpace(stdout.String())
	at := strings.LastIndex(printed, "\n")
	from := printed[at+1:]
	if from != "memory" && from != "database" {
		t.Fatalf("the trace of the retry on B says it was replayed from %q:\n%s\n%s", from, printed, logs())
	}
	t.Logf("B replayed the order from its %s", from)
	wantOneOrderReplayed(t, &env{t: t, db: testkit.Open(t, dbURL)}, printed[:max(at, 0)])
	a, _ := os.ReadFile(logA)
	b, _ := os.ReadFile(logB)
	if !strings.Contains(string(a), "replayed=false") || strings.Contains(string(a), "replayed=true") || !strings.Contains(string(b), "replayed=true") {
		t.Fatalf("the order did not run on A and replay on B:\n%s", logs())
	}
	for _, port := range []string{portA, portB} {
		for listening("127.0.0.1:" + port) {
			select {
			case <-ctx.Done():
				t.Fatalf("`kill $pids` did not stop the instance on port %s:\n%s", port, logs())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// freePort is a port of 127.0.0.1 that nothing listened on a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	return strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
}

// keepOnlyWhatWasThere removes, when the test ends, the file and the
// (then empty) directory that were not there at its start: the recipe's
// binary in the repository's git-ignored data/.
func keepOnlyWhatWasThere(t *testing.T, dir, file string) {
	t.Helper()
	_, dirErr := os.Stat(dir)
	_, fileErr := os.Stat(file)
	t.Cleanup(func() {
		if os.IsNotExist(fileErr) {
			os.Remove(file)
		}
		if os.IsNotExist(dirErr) {
			os.Remove(filepath.Clean(dir))
		}
	})
}
