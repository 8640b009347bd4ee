package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"
)

// report prints the summary table.
func report(out io.Writer, cfg config, ran time.Duration, f *fleet, t *traffic, settled int, a findings) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(name string, value any) { fmt.Fprintf(w, "%s\t%v\n", name, value) }
	fmt.Fprintln(w, "\nSOAK SUMMARY\t")
	row("traffic ran", ran.Round(time.Second))
	row("clients", fmt.Sprintf("%d API (reference client), %d browsers", cfg.apiClients, cfg.shoppers))
	total := 0
	for _, k := range slices.Sorted(maps.Keys(t.answers)) {
		row("  "+k, t.answers[k])
		total += t.answers[k]
	}
	row("operations answered", total)
	row("replayed answers", t.replays)
	row("unknown outcomes, settled after the faults", settled)
	for _, k := range slices.Sorted(maps.Keys(f.faults)) {
		row("fault: "+k, f.faults[k])
	}
	row("orders / paid / succeeded charges", fmt.Sprintf("%d / %d / %d", a.money.Orders, a.money.PaidOrders, a.money.Charges))
	row("events in the outbox (one per fact)", a.events.Events)
	row("orders answered as made / as paid", fmt.Sprintf("%d / %d", len(t.created), len(t.paid)))
	row("answered effects missing", a.missing)
	row("money movements / with an actor in the audit trail", fmt.Sprintf("%d / %d", a.trail.movements, a.trail.recorded))
	row("keys stuck in progress past their lease", len(a.stalled))
	row("RSS samples (every "+cfg.rssEvery.String()+")", f.samples)
	row("RSS peak A / B", fmt.Sprintf("%d MiB / %d MiB", f.rssPeak[0]>>20, f.rssPeak[1]>>20))
	row("RSS limit (cache + margin)", fmt.Sprintf("%d MiB + %d MiB", cfg.cacheBytes>>20, cfg.rssMargin>>20))
	row("violations", len(a.violations))
	w.Flush()
}
