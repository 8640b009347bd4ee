// Command testreport reads `go test -json` and prints what `go test` would
// print without -v — a line per package as soon as it finishes, and the
// output of each failed test — and then, last, every skipped test with the
// reason it gives, which names the command that enables it. A passing
// package's output is not shown by `go test`, so a skip would otherwise say
// nothing. Every 30 seconds it says what is still running, and how many of
// its tests have passed: one package runs for minutes, and go test compiles
// for minutes before the first package starts, both in silence.
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
	"time"
)

// progressEvery is how often a line says what is still running.
const progressEvery = 30 * time.Second

// event is one line of `go test -json` (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Time    time.Time
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
	r := follow(lines(os.Stdin), time.NewTicker(progressEvery).C, time.Now(), os.Stdout)
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

// lines sends each line of in, and is closed at its end.
func lines(in io.Reader) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		scanner := bufio.NewScanner(in)
		scanner.Buffer(make([]byte, 1<<20), 16<<20)
		for scanner.Scan() {
			out <- scanner.Text()
		}
	}()
	return out
}

// follow reads the lines to their end and, at each tick, says what is
// still running.
func follow(in <-chan string, ticks <-chan time.Time, start time.Time, out io.Writer) report {
	f := newFollower(out)
	for {
		select {
		case line, ok := <-in:
			if !ok {
				return f.report
			}
			f.line(line)
		case now := <-ticks:
			fmt.Fprintln(out, f.progress(now, start))
		}
	}
}

// follower is what the events have said so far.
type follower struct {
	report
	out      io.Writer
	outputs  map[string]*strings.Builder // a running test's output, by package and test
	running  map[string]*running         // by package
	finished int                         // packages
}

func newFollower(out io.Writer) *follower {
	return &follower{out: out, outputs: map[string]*strings.Builder{}, running: map[string]*running{}}
}

// line follows one event: package lines and build errors are printed as
// they come, a test's output is kept until it ends and printed if it
// failed, and the reason of each skip is kept for the end.
func (f *follower) line(line string) {
	var e event
	if err := json.Unmarshal([]byte(line), &e); err != nil || e.Action == "" {
		fmt.Fprintln(f.out, line)
		return
	}
	f.track(e)
	id := e.Package + " " + e.Test
	switch {
	case e.Action == "output" && e.Test != "":
		if f.outputs[id] == nil {
			f.outputs[id] = &strings.Builder{}
		}
		f.outputs[id].WriteString(e.Output)
	case e.Action == "output" || e.Action == "build-output":
		if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "PASS\n") {
			fmt.Fprint(f.out, e.Output)
		}
	case e.Action == "fail" || e.Action == "build-fail":
		f.failed = true
		if e.Test != "" && f.outputs[id] != nil {
			fmt.Fprint(f.out, f.outputs[id].String())
		}
	case e.Action == "pass" && e.Test == "":
		f.passed++
	case e.Action == "skip" && e.Test != "":
		f.skipped = append(f.skipped, e.Package+" "+e.Test+": "+reason(f.outputs[id]))
	}
	if e.Test != "" && ended(e.Action) {
		delete(f.outputs, id)
	}
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
