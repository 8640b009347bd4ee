package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// running is a package whose tests have started and not yet ended.
type running struct {
	since         time.Time
	passed, begun int // top-level tests: passed, and run but not yet ended
}

// ended says whether an action ends its test, or its package.
func ended(action string) bool { return action == "pass" || action == "fail" || action == "skip" }

// track keeps which packages are running, how many of their tests have
// passed and how many are running: a package that seems stuck is often
// waiting on its slowest parallel tests.
func (f *follower) track(e event) {
	if e.Package == "" {
		return
	}
	p := f.running[e.Package]
	switch {
	case e.Test == "" && ended(e.Action):
		if p != nil {
			delete(f.running, e.Package)
			f.finished++
		}
	case p == nil && e.Test == "":
		f.running[e.Package] = &running{since: e.Time}
	case p == nil || e.Test == "" || strings.Contains(e.Test, "/"):
		// the package's own output, or a subtest: counted with its test
	case e.Action == "run":
		p.begun++
	case ended(e.Action):
		p.begun--
		if e.Action == "pass" {
			p.passed++
		}
	}
}

// progress is the line that says, at now, what is running: each package
// still running, for how long, how many of its tests have passed and how
// many are running.
func (f *follower) progress(now, start time.Time) string {
	at := fmt.Sprintf("[%s] ", now.Sub(start).Round(time.Second))
	finished := fmt.Sprintf("; %d package(s) finished", f.finished)
	if len(f.running) == 0 {
		return at + "go test is compiling: no package is running" + finished
	}
	var names []string
	for _, name := range slices.Sorted(maps.Keys(f.running)) {
		p := f.running[name]
		names = append(names, fmt.Sprintf("%s (for %s, %d test(s) passed so far, %d running)",
			name, now.Sub(p.since).Round(time.Second), p.passed, p.begun))
	}
	return at + "still running: " + strings.Join(names, ", ") + finished
}
