package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// check is one line of the exactly-once audit: a count read from the
// database against what the clients did.
type check struct {
	what      string
	got, want int64
}

type audit []check

func (a audit) problems() []string {
	var out []string
	for _, c := range a {
		if c.got != c.want {
			out = append(out, fmt.Sprintf("%s: %d, want %d", c.what, c.got, c.want))
		}
	}
	return out
}

// audit counts, once every server has stopped (and flushed its replay
// counts), what each phase left in the database.
func (b *bench) audit(ctx context.Context, rep *report) (audit, error) {
	ids := func(phases ...string) []string {
		var out []string
		for _, p := range phases {
			for _, u := range b.users[p] {
				out = append(out, u.id)
			}
		}
		return out
	}
	ops := func(phases ...string) int64 {
		var n int64
		for _, p := range phases {
			n += int64(rep.phases[p].ops)
		}
		return n
	}
	var failed int64
	for _, p := range rep.phases {
		failed += int64(p.failed)
	}
	db := b.db.WithContext(ctx)
	var errs []error
	count := func(table, where string, args ...any) int64 {
		var n int64
		errs = append(errs, db.Table(table).Where(where, args...).Count(&n).Error)
		return n
	}
	// The users whose orders the instances with the middleware made, and
	// paid.
	once, bare, ceiling := ids(phaseWarmup, phaseFresh, phaseStorm, phaseMemory), ids(phaseBareSQL), ids(phaseCeiling)
	var replays int64
	errs = append(errs, db.Table("idempotency_keys").Where("scope IN ?", once).
		Joins("LEFT JOIN idempotency_replays r ON r.key_id = idempotency_keys.id AND r.operation_id = idempotency_keys.operation_id").
		Select("COALESCE(SUM(idempotency_keys.replays + COALESCE(r.n, 0)), 0)").Scan(&replays).Error)
	payments := "order_id IN (SELECT id FROM orders WHERE user_id IN ?)"
	k := int64(b.cfg.StormK)
	bareEvents := ops(phaseBareSQL)
	if b.cfg.BareWrites == bareWritesNone {
		bareEvents = 0
	}
	a := audit{
		{"failed operations", failed, 0},
		{"orders, with middleware (warm-up, fresh, storm, memory)", count("orders", "user_id IN ?", once), ops(phaseWarmup, phaseFresh, phaseStorm, phaseMemory)},
		{"orders, bare SQL", count("orders", "user_id IN ?", bare), ops(phaseBareSQL)},
		{"orders and keys, ceiling", count("orders", "user_id IN ?", ceiling) + count("idempotency_keys", "scope IN ?", ceiling), 0},
		{"completed keys, with middleware (orders and payments)", count("idempotency_keys", "scope IN ? AND state = ?", once, "completed"),
			ops(phaseWarmup, phaseFresh, phaseStorm, phasePay, phasePayStorm, phaseMemory)},
		{"completed keys, bare SQL", count("idempotency_keys", "scope IN ? AND state = ?", bare, "completed"), ops(phaseBareSQL)},
		{"audit entries of orders placed, bare SQL", count("audit_entries", "actor_id IN ? AND action = ?", bare, "order_placed"), ops(phaseBareSQL)},
		{"order.placed events, bare SQL (none with -bare-writes none)", count("events", "type = ? AND order_id IN (SELECT id FROM orders WHERE user_id IN ?)", "order.placed", bare), bareEvents},
		// Charges belong to no user: those since the run began.
		{"successful charges", count("simulated_charges", "status = ? AND created_at >= ?", "succeeded", b.began), ops(phasePay, phasePayStorm)},
		{"paid orders, with middleware", count("orders", "user_id IN ? AND status = ?", once, "paid"), ops(phasePay, phasePayStorm)},
		{"payments, with middleware", count("payments", payments, once), ops(phasePay, phasePayStorm)},
		{"replays counted on the keys (hit, at home in turn, other, cold, storms)", replays, ops(phaseHit, phaseHome, phaseOther, phaseCold) + (k-1)*ops(phaseStorm, phasePayStorm)},
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return a, nil
}

// ratio compares two phases measured in the same rounds: their throughput,
// or one phase's tail with its median.
type ratio struct {
	what       string
	value      func(rep *report) float64
	sqlite, pg float64 // the target on each database; 0: reported
	atMost     bool    // the target is an upper bound
}

// per is the throughput of phase num over that of den.
func per(num, den string) func(rep *report) float64 {
	return func(rep *report) float64 {
		if d := rep.phases[den].throughput(); d > 0 {
			return rep.phases[num].throughput() / d
		}
		return 0
	}
}

// medianPer is the median over the rounds of phase num's throughput over
// den's in the same round.
func medianPer(num, den string) func(rep *report) float64 {
	return func(rep *report) float64 {
		n, d := rep.phases[num].perSlice, rep.phases[den].perSlice
		var rs []float64
		for i := range min(len(n), len(d)) {
			if d[i] > 0 {
				rs = append(rs, n[i]/d[i])
			}
		}
		if len(rs) == 0 {
			return 0
		}
		slices.Sort(rs)
		if len(rs)%2 == 1 {
			return rs[len(rs)/2]
		}
		return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
	}
}

// tail is the phase's p99 over its p50.
func tail(name string) func(rep *report) float64 {
	return func(rep *report) float64 {
		p := rep.phases[name]
		if p50 := p.percentile(0.5); p50 > 0 {
			return float64(p.percentile(0.99)) / float64(p50)
		}
		return 0
	}
}

var ratios = []ratio{
	{"replay (hit) / ceiling", per(phaseHit, phaseCeiling), 0.8, 0.8, false},
	{"replay (other instance) / ceiling", per(phaseOther, phaseCeiling), 0.6, 0.6, false},
	{"replay (cold instance, database read) / ceiling", per(phaseCold, phaseCeiling), 0, 0, false},
	// The same keys in the same order on both, each once on SQLite, where another instance
	// reads the key row (no pushes): reported; over and over on PostgreSQL (bench.eachOnce).
	{"replay (other instance) / replay (at home, the keys in turn), median over rounds", medianPer(phaseOther, phaseHome), 0, 1, false},
	{"fresh order / bare SQL", per(phaseFresh, phaseBareSQL), 0.8, 0.75, false},
	{"fresh order with middleware, p99 / p50", tail(phaseFresh), 10, 0, true},
}

func (r ratio) verdict(rep *report) string {
	target := r.sqlite
	if rep.database == "PostgreSQL" {
		target = r.pg
	}
	v, sign := r.value(rep), "≥"
	if r.atMost {
		sign = "≤"
	}
	switch {
	case target == 0:
		return "reported"
	case r.atMost && v <= target || !r.atMost && v >= target:
		return fmt.Sprintf("meets %s %.2g", sign, target)
	}
	return fmt.Sprintf("MISSES %s %.2g", sign, target)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }

func (rep *report) print(out io.Writer) {
	fmt.Fprintf(out, "%s, %d workers, %d rounds, storms of %d, GOMAXPROCS %d\n\n", rep.database, rep.workers, rep.rounds, rep.stormK, runtime.GOMAXPROCS(0))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "phase\tops\trequests\tops/s\tp50 ms\tp95 ms\tp99 ms\tfailures\t")
	for _, name := range reported {
		p := rep.phases[name]
		fmt.Fprintf(w, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%d\t\n", name, p.ops, p.requests, p.throughput(), ms(p.percentile(0.5)), ms(p.percentile(0.95)), ms(p.percentile(0.99)), p.failed)
	}
	w.Flush()
	fmt.Fprintln(out)
	for _, r := range ratios {
		fmt.Fprintf(out, "%-56s %5.2f  %s\n", r.what, r.value(rep), r.verdict(rep))
	}
	var mem strings.Builder
	rep.memory.markdown(&mem)
	fmt.Fprint(out, "\n", mem.String())
	fmt.Fprintln(out, "audit:")
	for _, c := range rep.audit {
		mark := "ok"
		if c.got != c.want {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "  %-4s %-56s %d (want %d)\n", mark, c.what, c.got, c.want)
	}
	for _, name := range reported {
		for _, f := range rep.phases[name].failures {
			fmt.Fprintf(out, "  failure in %s: %s\n", name, f)
		}
	}
}

func (rep *report) markdown(label string) string {
	if label == "" {
		label = rep.database
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "### %s\n\n%d client goroutines. The phases from the fresh orders to the payments ran interleaved, in %d rounds; "+
		"the warm-up and the storms once each. Storms send each operation %d times at once. "+
		"Latency is per operation (a storm's is its slowest copy). The payment provider answers at once.\n\n",
		label, rep.workers, rep.rounds, rep.stormK)
	sb.WriteString("| phase | ops | HTTP requests | ops/s | p50 ms | p95 ms | p99 ms |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, name := range reported {
		p := rep.phases[name]
		requests := fmt.Sprint(p.requests)
		if name == phaseBareSQL {
			requests = "–"
		}
		fmt.Fprintf(&sb, "| %s | %d | %s | %.0f | %s | %s | %s |\n", name, p.ops, requests, p.throughput(), ms(p.percentile(0.5)), ms(p.percentile(0.95)), ms(p.percentile(0.99)))
	}
	sb.WriteString("\n| ratio | value | target |\n|---|--:|---|\n")
	for _, r := range ratios {
		fmt.Fprintf(&sb, "| %s | %.2f | %s |\n", r.what, r.value(rep), r.verdict(rep))
	}
	sb.WriteString("\n")
	rep.memory.markdown(&sb)
	sb.WriteString("Exactly-once audit, counted in the database after every server stopped:\n\n| count | database | expected |\n|---|--:|--:|\n")
	for _, c := range rep.audit {
		fmt.Fprintf(&sb, "| %s | %d | %d |\n", c.what, c.got, c.want)
	}
	sb.WriteString("\n")
	return sb.String()
}
