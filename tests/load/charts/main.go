// Command charts draws BENCHMARKS.md's charts from the load harness's
// -json files (tests/load/export.go), as PNG files in -out:
//
//   - throughput.png: ops/s per phase, a bar per database, from the full
//     runs (-phases), and the fresh orders alone of the group-commit runs
//     (-latency), a row per label;
//
//   - latency.png: the distribution of a fresh order's latency, one line
//     per label of the -latency runs (their rounds merged), on a log axis;
//
//   - peer.png, with -peer: the shop's ops/s over its peer's (peer.go).
//
//     go run ./tests/load/charts -out docs/bench -phases sqlite.json,pg.json -latency on-1.json,off-1.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// run is what the charts read of a -json file.
type run struct {
	Label    string `json:"label"`
	Database string `json:"database"`
	Phases   []struct {
		Name    string  `json:"name"`
		Ops     int     `json:"ops"`
		Seconds float64 `json:"seconds"`
	} `json:"phases"`
	FreshLatenciesMS []float64 `json:"fresh_latencies_ms"`
}

// The harness's name of the fresh orders' phase (tests/load/measure.go).
const phaseFresh = "fresh order, with middleware"

func main() {
	out := flag.String("out", "docs/bench", "the directory the PNG files go to")
	phases := flag.String("phases", "", "comma-separated -json files of full runs: a bar per database")
	latency := flag.String("latency", "", "comma-separated -json files of fresh-only runs: a line per label")
	peer := flag.String("peer", "", "comma-separated database=file pairs of scripts/bench's shop beside its peer: peer.png")
	flag.Parse()
	err := draw(*out, split(*phases), split(*latency))
	if err == nil && *peer != "" {
		err = versusPeer(split(*peer), filepath.Join(*out, "peer.png"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "charts:", err)
		os.Exit(1)
	}
}

func split(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}

func draw(out string, phaseFiles, latencyFiles []string) error {
	full, err := readAll(phaseFiles)
	if err != nil {
		return err
	}
	fresh, err := readAll(latencyFiles)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := throughput(full, fresh, filepath.Join(out, "throughput.png")); err != nil {
		return err
	}
	return latencies(fresh, filepath.Join(out, "latency.png"))
}

func readAll(paths []string) ([]run, error) {
	var runs []run
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var r run
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// table is ops/s by row (a phase, or a label) and by database, with the
// rows and the databases in the order first seen.
type table struct {
	rows, databases []string
	ops, seconds    map[[2]string]float64
}

func (t *table) add(row, database string, ops int, seconds float64) {
	if !slices.Contains(t.rows, row) {
		t.rows = append(t.rows, row)
	}
	if !slices.Contains(t.databases, database) {
		t.databases = append(t.databases, database)
	}
	t.ops[[2]string{row, database}] += float64(ops)
	t.seconds[[2]string{row, database}] += seconds
}

func (t *table) rate(row, database string) float64 {
	k := [2]string{row, database}
	if t.seconds[k] == 0 {
		return 0
	}
	return t.ops[k] / t.seconds[k]
}

// throughput draws a horizontal bar per phase and database, the first
// phase on top: the full runs' phases, then the fresh-only runs' labels.
func throughput(full, fresh []run, path string) error {
	t := &table{ops: map[[2]string]float64{}, seconds: map[[2]string]float64{}}
	for _, r := range full {
		for _, p := range r.Phases {
			if strings.HasPrefix(p.Name, "warm-up") {
				continue // not measured: it fills the caches and the tables
			}
			t.add(p.Name, r.Database, p.Ops, p.Seconds)
		}
	}
	for _, r := range fresh {
		for _, p := range r.Phases {
			if p.Name == phaseFresh {
				t.add("fresh orders alone, "+r.Label, r.Database, p.Ops, p.Seconds)
			}
		}
	}
	rows := slices.Clone(t.rows)
	slices.Reverse(rows)
	p := plot.New()
	p.Title.Text = "Throughput per phase"
	p.X.Label.Text = "operations per second"
	width := vg.Points(10)
	for i, database := range t.databases {
		values := make(plotter.Values, len(rows))
		for j, row := range rows {
			values[j] = t.rate(row, database)
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(len(t.databases)-1)/2-float64(i)) // the first database on top
		p.Add(bars)
		p.Legend.Add(database, bars)
		if err := valueLabels(p, values, bars.Offset, "%.0f"); err != nil {
			return err
		}
	}
	p.X.Max *= 1.15 // room for the last label
	p.Legend.Top = true
	p.NominalY(rows...)
	p.Add(plotter.NewGrid())
	return p.Save(22*vg.Centimeter, vg.Length(3+len(rows))*vg.Centimeter*0.9, path)
}

// valueLabels writes each bar's value at its end, in format, offset as its
// bar.
func valueLabels(p *plot.Plot, values plotter.Values, offset vg.Length, format string) error {
	var at plotter.XYLabels
	for j, v := range values {
		if v > 0 {
			at.XYs = append(at.XYs, plotter.XY{X: v, Y: float64(j)})
			at.Labels = append(at.Labels, fmt.Sprintf(format, v))
		}
	}
	labels, err := plotter.NewLabels(at)
	if err != nil {
		return err
	}
	labels.Offset = vg.Point{X: vg.Points(3), Y: offset - vg.Points(4)}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Font.Size = vg.Points(8)
	}
	p.Add(labels)
	return nil
}

// latencies draws, per label, the share of fresh orders answered within
// each latency: a cumulative distribution on a log axis of milliseconds.
func latencies(fresh []run, path string) error {
	var labels []string
	byLabel := map[string][]float64{}
	for _, r := range fresh {
		if _, ok := byLabel[r.Label]; !ok {
			labels = append(labels, r.Label)
		}
		byLabel[r.Label] = append(byLabel[r.Label], r.FreshLatenciesMS...)
	}
	p := plot.New()
	p.Title.Text = "Latency of a fresh order (SQLite, fresh orders alone)"
	p.X.Label.Text = "milliseconds (log scale)"
	p.Y.Label.Text = "share of orders answered within"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	for i, label := range labels {
		ms := byLabel[label]
		slices.Sort(ms)
		points := make(plotter.XYs, 0, len(ms))
		for j, v := range ms {
			points = append(points, plotter.XY{X: max(v, 0.01), Y: float64(j+1) / float64(len(ms))})
		}
		line, err := plotter.NewLine(points)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(2)
		p.Add(line)
		p.Legend.Add(label, line)
	}
	p.Legend.Left, p.Legend.Top = true, true
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 200}
	p.Add(grid)
	return p.Save(18*vg.Centimeter, 11*vg.Centimeter, path)
}
