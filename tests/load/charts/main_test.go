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

// The shop beside its peer is drawn from scripts/bench's lines (round,
// who, fresh ops/s, replay ops/s), the median of each ratio over rounds.
func TestPeerChartDrawnFromTheBenchLines(t *testing.T) {
	dir := t.TempDir()
	lines := filepath.Join(dir, "peer-SQLite.txt")
	runs := "1 shop 300 10000\n1 memory 350 12000\n1 redis 300 8000\n1 full 280 7000\n" +
		"2 full 290 7100\n2 redis 310 8100\n2 memory 360 11000\n2 shop 320 9000\n"
	if err := os.WriteFile(lines, []byte(runs), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "peer.png")
	if err := versusPeer([]string{"SQLite=" + lines, "PostgreSQL=" + lines}, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if img, err := png.Decode(f); err != nil || img.Bounds().Dx() < 300 {
		t.Fatalf("peer.png: %v", err)
	}
	if got, want := median([]float64{300.0 / 280, 320.0 / 290}), (300.0/280+320.0/290)/2; got != want {
		t.Errorf("median of the rounds' ratios: %v, want %v", got, want)
	}
	if err := versusPeer([]string{lines}, path); err == nil {
		t.Error("a file without its database was taken")
	}
}
