package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The peer's runs in scripts/bench's lines, and what each is called.
var peers = []struct{ who, name string }{
	{"memory", "peer, memory"},
	{"redis", "peer, Redis"},
	{"full", "peer, Redis + the same writes"},
}

// versusPeer draws peer.png: for fresh orders and replays on each database,
// the shop's ops/s over each peer's, the median over the rounds, from
// scripts/bench's files of the shop beside its peer (database=path; each
// line: round, who, fresh ops/s, replay ops/s).
func versusPeer(files []string, path string) error {
	var rows []string
	medians := map[string][]float64{} // by peer, a value per row
	for _, f := range files {
		database, file, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("-peer %q: want database=file", f)
		}
		rates, err := readPeerRuns(file)
		if err != nil {
			return err
		}
		for kind, label := range []string{"fresh order", "replay"} {
			rows = append(rows, label+", "+database)
			for _, p := range peers {
				var ratios []float64
				for round, shop := range rates["shop"] {
					if peer := rates[p.who]; round < len(peer) && peer[round][kind] > 0 {
						ratios = append(ratios, shop[kind]/peer[round][kind])
					}
				}
				medians[p.who] = append(medians[p.who], median(ratios))
			}
		}
	}
	slices.Reverse(rows)    // the first row on top
	rows = append(rows, "") // and above it, an empty row for the legend
	pl := plot.New()
	pl.Title.Text = "The shop's ops/s over the peer's (median over rounds; a hot product)"
	pl.X.Label.Text = "shop / peer"
	width := vg.Points(10)
	for i, p := range peers {
		values := slices.Clone(plotter.Values(medians[p.who]))
		slices.Reverse(values)
		values = append(values, 0) // the legend's row
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(len(peers)-1)/2-float64(i))
		pl.Add(bars)
		pl.Legend.Add("over the "+p.name, bars)
		if err := valueLabels(pl, values, bars.Offset, "%.2f"); err != nil {
			return err
		}
	}
	pl.X.Min, pl.X.Max = 0, pl.X.Max*1.15
	pl.Legend.Top = true
	pl.NominalY(rows...)
	pl.Add(plotter.NewGrid())
	return pl.Save(22*vg.Centimeter, vg.Length(4+2*len(rows))*vg.Centimeter*0.9, path)
}

// readPeerRuns reads the lines of one database: by who, a [fresh, replay]
// ops/s pair per round, in the order of the rounds.
func readPeerRuns(path string) (map[string][][2]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rates := map[string][][2]float64{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) != 4 {
			return nil, fmt.Errorf("%s: %q: want round, who, fresh ops/s, replay ops/s", path, lines.Text())
		}
		var pair [2]float64
		for i := range pair {
			if pair[i], err = strconv.ParseFloat(fields[2+i], 64); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		rates[fields[1]] = append(rates[fields[1]], pair)
	}
	return rates, lines.Err()
}

func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(values))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
