package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// What scripts/bench reads of a run: the fresh orders' figure line, and
// the JSON its charts (tests/load/charts) are drawn from.

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// figure is the fresh orders' line for scripts/bench (the bare SQL's with
// -bare-only): operations, seconds, p50 and p99 in milliseconds, and the
// SQLite commits per order in the rounds (0 on PostgreSQL; only that
// phase's orders with -fresh-only or -bare-only).
func (r *report) figure() string {
	p := r.phases[r.figuredPhase()]
	return fmt.Sprintf("%d %.3f %.2f %.2f %.3f\n", p.ops, p.elapsed.Seconds(), millis(p.percentile(0.50)), millis(p.percentile(0.99)), r.commitsPerOrder())
}

// figuredPhase is the phase of the figure line.
func (r *report) figuredPhase() string {
	if r.figured == "" {
		return phaseFresh
	}
	return r.figured
}

func (r *report) commitsPerOrder() float64 {
	if ops := r.phases[r.figuredPhase()].ops; ops > 0 {
		return float64(r.commits) / float64(ops)
	}
	return 0
}

// runJSON is a run for the charts. FreshLatenciesMS are the fresh orders'
// latencies, one per order, sorted.
type runJSON struct {
	Label            string      `json:"label"`
	Database         string      `json:"database"`
	Workers          int         `json:"workers"`
	GroupCommit      int         `json:"group_commit"`
	CommitsPerOrder  float64     `json:"commits_per_order"`
	Commits          uint64      `json:"commits"`              // SQLite commits in the rounds
	Committed        uint64      `json:"committed_operations"` // operations they held
	Phases           []phaseJSON `json:"phases"`
	FreshLatenciesMS []float64   `json:"fresh_latencies_ms"`
}

type phaseJSON struct {
	Name    string  `json:"name"`
	Ops     int     `json:"ops"`
	Seconds float64 `json:"seconds"`
	OpsPerS float64 `json:"ops_per_s"`
	P50MS   float64 `json:"p50_ms"`
	P99MS   float64 `json:"p99_ms"`
}

// writeJSON writes the run, labelled label (the database when empty), to
// path: each phase that did work, in the order they are reported.
func (r *report) writeJSON(path, label string) error {
	if label == "" {
		label = r.database
	}
	run := runJSON{Label: label, Database: r.database, Workers: r.workers, GroupCommit: r.groupCommit, CommitsPerOrder: r.commitsPerOrder(),
		Commits: r.commits, Committed: r.committed}
	for _, name := range reported {
		p := r.phases[name]
		if p.ops == 0 {
			continue
		}
		run.Phases = append(run.Phases, phaseJSON{name, p.ops, p.elapsed.Seconds(), p.throughput(), millis(p.percentile(0.5)), millis(p.percentile(0.99))})
	}
	for _, d := range r.phases[phaseFresh].latencies {
		run.FreshLatenciesMS = append(run.FreshLatenciesMS, millis(d))
	}
	data, err := json.Marshal(run)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
