// Command testreport reads `go test -json` and prints what `go test` would
// print without -v — a line per package, and the output of each failed test
// — and then, last, every skipped test with the reason it gives, which names
// the command that enables it. A passing package's output is not shown by
// `go test`, so a skip would otherwise say nothing.
//
//	go test -race -json ./... | go run ./internal/testreport
//
// It exits 1 if a test or a package failed, and, with -skips=fail (CI, where
// every tool is installed), if any test was skipped.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// report is what the run said, once read to the end.
type report struct {
	failed  bool
	passed  int
	skipped []string // "package TestName: reason"
}

func main() {
	skips := flag.String("skips", "report", "report: list skipped tests last; fail: also exit 1 if any")
	flag.Parse()
	r := read(os.Stdin, os.Stdout)
	if len(r.skipped) > 0 {
		fmt.Printf("\n%d test(s) skipped, each with what enables it:\n", len(r.skipped))
		for _, s := range r.skipped {
			fmt.Println("  " + s)
		}
	}
	switch {
	case r.failed:
		os.Exit(1)
	case r.passed == 0:
		fmt.Println("testreport: no package passed; is the input `go test -json`?")
		os.Exit(1)
	case len(r.skipped) > 0 && *skips == "fail":
		fmt.Println("testreport: -skips=fail: a skipped test is a failure here")
		os.Exit(1)
	}
}

// read follows the events: package lines and build errors are printed as
// they come, a test's output is kept until it ends and printed if it
// failed, and the reason of each skip is kept for the end.
func read(in io.Reader, out io.Writer) report {
	var r report
	outputs := map[string]*strings.Builder{}
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var e event
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, scanner.Text())
			continue
		}
		id := e.Package + " " + e.Test
		switch {
		case e.Action == "output" && e.Test != "":
			if outputs[id] == nil {
				outputs[id] = &strings.Builder{}
			}
			outputs[id].WriteString(e.Output)
		case e.Action == "output" || e.Action == "build-output":
			if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "PASS\n") {
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "fail" || e.Action == "build-fail":
			r.failed = true
			if e.Test != "" && outputs[id] != nil {
				fmt.Fprint(out, outputs[id].String())
			}
		case e.Action == "pass" && e.Test == "":
			r.passed++
		case e.Action == "skip" && e.Test != "":
			r.skipped = append(r.skipped, e.Package+" "+e.Test+": "+reason(outputs[id]))
		}
		if e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
			delete(outputs, id)
		}
	}
	return r
}

// reason is what a skipped test said: its output without the === and
// --- lines and the file:line prefix.
func reason(output *strings.Builder) string {
	if output == nil {
		return "(no reason given)"
	}
	var said []string
	for _, line := range strings.Split(output.String(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "=== ") || strings.HasPrefix(line, "--- ") {
			continue
		}
		if _, text, found := strings.Cut(line, ".go:"); found {
			if _, rest, ok := strings.Cut(text, ": "); ok {
				line = rest
			}
		}
		said = append(said, line)
	}
	if len(said) == 0 {
		return "(no reason given)"
	}
	return strings.Join(said, " ")
}
