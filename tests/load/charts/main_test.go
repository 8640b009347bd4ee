package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// The charts are drawn from the harness's JSON: both PNG files, readable,
// with a phase per row and a line per label.
func TestChartsDrawnFromTheHarnessJSON(t *testing.T) {
	dir := t.TempDir()
	write := func(name, label, database string, latencies ...float64) string {
		var r run
		r.Label, r.Database, r.FreshLatenciesMS = label, database, latencies
		r.Phases = append(r.Phases, struct {
			Name    string  `json:"name"`
			Ops     int     `json:"ops"`
			Seconds float64 `json:"seconds"`
		}{phaseFresh, 100, 1})
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	full := []string{write("sqlite.json", "SQLite", "SQLite"), write("pg.json", "PostgreSQL", "PostgreSQL")}
	fresh := []string{write("on.json", "group commit on", "SQLite", 0.5, 2, 9), write("off.json", "group commit off", "SQLite", 3, 40, 120)}
	out := filepath.Join(dir, "charts")
	if err := draw(out, full, fresh); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"throughput.png", "latency.png"} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
			t.Errorf("%s is %v: too small to read", name, b)
		}
	}
}
