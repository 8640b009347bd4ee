package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/orders"
)

// The harness, tiny: every phase does some work, in two interleaved rounds,
// and the exactly-once audit it reads back from the database holds.
func TestLoadSmoke(t *testing.T) {
	cfg := config{DatabaseURL: testkit.URL(t), Phase: 300 * time.Millisecond, Ops: 12, Workers: 2, StormK: 3, Rounds: 2, MemoryOps: 150}
	rep, err := measure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, name := range reported {
		if rep.phases[name].ops == 0 {
			t.Errorf("phase %q did nothing:\n%s", name, out.String())
		}
	}
	if problems := rep.audit.problems(); len(problems) > 0 {
		t.Errorf("audit: %v\n%s", problems, out.String())
	}
	md := rep.markdown("SQLite")
	if rep.memory.completed < int64(cfg.MemoryOps) || !strings.Contains(md, "| other instance (answers pushed on PostgreSQL) |") {
		t.Errorf("memory: %d operations completed, want %d, and the caches reported:\n%s", rep.memory.completed, cfg.MemoryOps, md)
	}
	for _, r := range ratios {
		if !strings.Contains(md, "| "+r.what+" |") {
			t.Errorf("the Markdown lacks the ratio %q:\n%s", r.what, md)
		}
	}
}

// The scale-out's run, tiny: fresh orders spread over three instances on
// the one database, each of which takes orders, and the audit holds (every
// order once, with its key and its reserved units).
func TestLoadFreshOnlyOverInstances(t *testing.T) {
	cfg := config{DatabaseURL: testkit.URL(t), Phase: 300 * time.Millisecond, Ops: 60, Workers: 3, StormK: 3, Rounds: 1,
		Catalog: catalogSpread, FreshOnly: true, Instances: 3}
	b, rep, err := measureBench(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if problems := rep.audit.problems(); len(problems) > 0 {
		t.Fatalf("audit: %v", problems)
	}
	if len(b.placing) != 3 || rep.phases[phaseFresh].ops == 0 || rep.phases[phaseFresh].failed != 0 {
		t.Fatalf("%d instances placing, %d fresh orders, %d failed: want 3 instances, orders, none failed", len(b.placing), rep.phases[phaseFresh].ops, rep.phases[phaseFresh].failed)
	}
	for i, s := range b.placing {
		if s.served.Load() == 0 {
			t.Errorf("instance %d answered no order", i)
		}
	}
	if _, err := measure(context.Background(), config{Phase: time.Millisecond, Workers: 1, Rounds: 1, Instances: 2}); err == nil {
		t.Error("-instances 2 without -fresh-only: want an error")
	}
}

// The price of stock's run, tiny: fresh orders alone on the spread
// catalog reserve their units, across many products, and the audit holds;
// its figure line and its JSON (for the charts) carry the fresh orders.
func TestLoadFreshOnlySpread(t *testing.T) {
	cfg := config{DatabaseURL: testkit.URL(t), Phase: 300 * time.Millisecond, Ops: 40, Workers: 2, StormK: 3, Rounds: 1, Catalog: catalogSpread, FreshOnly: true}
	rep, err := measure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if problems := rep.audit.problems(); len(problems) > 0 {
		t.Fatalf("audit: %v", problems)
	}
	orders := rep.phases[phaseWarmup].ops + rep.phases[phaseFresh].ops
	if rep.phases[phaseFresh].ops == 0 || rep.phases[phaseStorm].ops != 0 || rep.phases[phaseHit].ops != 0 {
		t.Fatalf("fresh %d, storm %d, replays %d: want fresh orders alone", rep.phases[phaseFresh].ops, rep.phases[phaseStorm].ops, rep.phases[phaseHit].ops)
	}
	db := testkit.Open(t, cfg.DatabaseURL)
	var got struct{ Products, Taken int64 }
	err = db.Raw(`SELECT COUNT(*) AS products, COALESCE(SUM(2147483647 - stock), 0) AS taken FROM products WHERE sku LIKE 'BENCH-%' AND stock < 2147483647`).Scan(&got).Error
	if err != nil {
		t.Fatal(err)
	}
	// Each order takes 3 units (2 and 1) of two products of the 64.
	if got.Taken != int64(3*orders) || got.Products < 8 {
		t.Fatalf("%d orders took %d units from %d products: want %d units, from 8 products or more", orders, got.Taken, got.Products, 3*orders)
	}
	if _, err := fmt.Sscan(rep.figure(), new(int), new(float64), new(float64), new(float64), new(float64)); err != nil {
		t.Fatalf("figure %q: %v", rep.figure(), err)
	}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := rep.writeJSON(path, "spread"); err != nil {
		t.Fatal(err)
	}
	var run runJSON
	if data, err := os.ReadFile(path); err != nil || json.Unmarshal(data, &run) != nil {
		t.Fatalf("the JSON: %v %s", err, data)
	}
	if run.Label != "spread" || len(run.FreshLatenciesMS) != rep.phases[phaseFresh].ops || len(run.Phases) != 2 {
		t.Fatalf("the JSON has label %q, %d latencies for %d fresh orders and %d phases (want the warm-up and the fresh orders)",
			run.Label, len(run.FreshLatenciesMS), rep.phases[phaseFresh].ops, len(run.Phases))
	}
}

// The price of stock and events' runs, tiny: the bare SQL alone on the
// spread catalog, with everything a fresh order writes and with no
// reservation and no outbox event. With full writes each bare order takes
// its 3 units and records its event; with none it takes no unit and
// records no event (the audit counts the events and the audit entries);
// the figure line is the bare SQL's.
func TestLoadBareOnlyWrites(t *testing.T) {
	for _, writes := range []string{bareWritesFull, bareWritesNone} {
		t.Run(writes, func(t *testing.T) {
			cfg := config{DatabaseURL: testkit.URL(t), Phase: 300 * time.Millisecond, Ops: 40, Workers: 2, StormK: 3, Rounds: 1,
				Catalog: catalogSpread, BareOnly: true, BareWrites: writes}
			rep, err := measure(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if problems := rep.audit.problems(); len(problems) > 0 {
				t.Fatalf("audit: %v", problems)
			}
			bare := rep.phases[phaseBareSQL].ops
			if bare == 0 || rep.phases[phaseFresh].ops != 0 || rep.phases[phaseHit].ops != 0 {
				t.Fatalf("bare %d, fresh %d, replays %d: want the bare SQL alone", bare, rep.phases[phaseFresh].ops, rep.phases[phaseHit].ops)
			}
			db := testkit.Open(t, cfg.DatabaseURL)
			var taken int64
			err = db.Raw(`SELECT COALESCE(SUM(2147483647 - stock), 0) FROM products WHERE sku LIKE 'BENCH-%'`).Scan(&taken).Error
			if err != nil {
				t.Fatal(err)
			}
			orders := rep.phases[phaseWarmup].ops // the warm-up's orders are the shop's: they reserve
			if writes == bareWritesFull {
				orders += bare
			}
			if taken != int64(3*orders) {
				t.Fatalf("%d units taken, want %d (warm-up %d, bare %d, writes %s)", taken, 3*orders, rep.phases[phaseWarmup].ops, bare, writes)
			}
			var n int
			if _, err := fmt.Sscan(rep.figure(), &n); err != nil || n != bare {
				t.Fatalf("figure %q: %v, want the bare SQL's %d orders", rep.figure(), err, bare)
			}
		})
	}
}

// The shop beside its peer, tiny: fresh orders and their replays alone, in
// the same rounds; the audit counts the replays on the keys.
func TestLoadFreshOnlyReplays(t *testing.T) {
	cfg := config{DatabaseURL: testkit.URL(t), Phase: 300 * time.Millisecond, Ops: 40, Workers: 2, StormK: 3, Rounds: 1, Catalog: catalogHot,
		FreshOnly: true, Replays: true}
	rep, err := measure(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if problems := rep.audit.problems(); len(problems) > 0 {
		t.Fatalf("audit: %v", problems)
	}
	if rep.phases[phaseFresh].ops == 0 || rep.phases[phaseHit].ops == 0 || rep.phases[phaseBareSQL].ops != 0 || rep.phases[phaseOther].ops != 0 {
		t.Fatalf("fresh %d, replays %d, bare %d, other %d: want the fresh orders and their replays alone",
			rep.phases[phaseFresh].ops, rep.phases[phaseHit].ops, rep.phases[phaseBareSQL].ops, rep.phases[phaseOther].ops)
	}
	cfg.Catalog = catalogSpread
	if _, err := measure(context.Background(), cfg); err == nil {
		t.Fatal("-replays ran on the spread catalog, whose orders a replay's body does not match")
	}
}

// The peer, driven as the shop is: fresh orders, each created once, and
// their replays, each the original answer byte for byte; a peer that makes
// a new order on a retry fails every replay.
func TestLoadPeer(t *testing.T) {
	for _, honest := range []bool{true, false} {
		peer := newFakePeer(honest)
		cfg := config{Peer: peer.URL, Phase: 300 * time.Millisecond, Ops: 40, Workers: 2, StormK: 3, Rounds: 1}
		rep, err := measurePeer(context.Background(), cfg)
		peer.Close()
		if err != nil {
			t.Fatal(err)
		}
		orders, replays := rep.phases[phaseWarmup].ops+rep.phases[phaseFresh].ops, rep.phases[phaseHit].ops
		if honest && (len(rep.audit.problems()) > 0 || peer.created() != orders || replays == 0) {
			t.Fatalf("audit %v; %d orders created for %d fresh orders, %d replays", rep.audit.problems(), peer.created(), orders, replays)
		}
		if !honest && (rep.phases[phaseHit].failed != replays || len(rep.audit.problems()) == 0) {
			t.Fatalf("a peer that makes a new order on each retry: %d of %d replays failed, audit %v", rep.phases[phaseHit].failed, replays, rep.audit.problems())
		}
	}
}

// fakePeer answers as the peer does: 201 and an order id, the same id again
// for a key it has seen, unless it is dishonest (a new order each time).
type fakePeer struct {
	*httptest.Server
	mu      sync.Mutex
	answers map[string]string
	n       int
}

func newFakePeer(honest bool) *fakePeer {
	p := &fakePeer{answers: map[string]string{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if _, ok := p.answers[key]; !ok || !honest {
			p.n++
			p.answers[key] = fmt.Sprintf(`{"id":%d}`, p.n)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, p.answers[key])
	}))
	return p
}

func (p *fakePeer) created() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// -shop: the harness drives a shop it did not start (here one served
// beside it on the same database; scripts/bench runs the shop's binary):
// the users and stock it prepared are the shop's, the fresh orders and
// their replays go over HTTP, and the audit counts them in the database.
func TestLoadDrivesAShopItDidNotStart(t *testing.T) {
	url := testkit.URL(t)
	db := testkit.Open(t, url)
	if err := errors.Join(database.Migrate(db), orders.Seed(db)); err != nil { // as main does at start
		t.Fatal(err)
	}
	server := handlers.NewServer(shopDeps(db))
	srv := httptest.NewServer(server)
	t.Cleanup(func() { srv.Close(); _ = server.Close(context.Background()) })
	cfg := config{DatabaseURL: url, Phase: 300 * time.Millisecond, Ops: 40, Workers: 2, Rounds: 2, Catalog: catalogHot, StockSlots: 4,
		FreshOnly: true, Replays: true, Shop: srv.URL}
	rep, err := measureProcess(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if problems := rep.audit.problems(); len(problems) > 0 {
		t.Fatalf("audit: %v", problems)
	}
	if rep.phases[phaseFresh].ops == 0 || rep.phases[phaseHit].ops == 0 {
		t.Fatalf("%d fresh orders, %d replays: want both", rep.phases[phaseFresh].ops, rep.phases[phaseHit].ops)
	}
	var orders int64
	if err := db.Table("orders").Count(&orders).Error; err != nil || orders != int64(rep.phases[phaseWarmup].ops+rep.phases[phaseFresh].ops) {
		t.Fatalf("%d orders in the shop's database (%v), want the warm-up's and the fresh phase's %d", orders, err, rep.phases[phaseWarmup].ops+rep.phases[phaseFresh].ops)
	}
	if _, err := measureProcess(context.Background(), config{DatabaseURL: url, Shop: srv.URL, Phase: time.Millisecond, Workers: 1, Rounds: 1}); err == nil {
		t.Error("-shop without -fresh-only -replays: want an error")
	}
	for what, bad := range map[string]config{
		"-shop without -db": {Shop: srv.URL, FreshOnly: true, Replays: true, Phase: time.Millisecond, Workers: 1, Rounds: 1},
	} {
		if err := run(context.Background(), bad, io.Discard); err == nil {
			t.Errorf("%s: want an error", what)
		}
	}
}

// -shop with -peer: the shop and the peer in one run, in slices that take
// turns; each side's orders are made once on its own side (the shop's
// database, the peer's count), its replays answered, and both written.
func TestLoadShopBesideItsPeer(t *testing.T) {
	url := testkit.URL(t)
	db := testkit.Open(t, url)
	if err := errors.Join(database.Migrate(db), orders.Seed(db)); err != nil {
		t.Fatal(err)
	}
	server := handlers.NewServer(shopDeps(db))
	srv := httptest.NewServer(server)
	t.Cleanup(func() { srv.Close(); _ = server.Close(context.Background()) })
	peer := newFakePeer(true)
	t.Cleanup(peer.Close)
	dir := t.TempDir()
	cfg := config{DatabaseURL: url, Phase: 400 * time.Millisecond, Ops: 40, Workers: 2, Rounds: 2, Catalog: catalogHot, StockSlots: 4,
		FreshOnly: true, Replays: true, Shop: srv.URL, Peer: peer.URL, JSON: filepath.Join(dir, "shop.json"), PeerJSON: filepath.Join(dir, "peer.json")}
	if err := run(context.Background(), cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	ops := func(file, database string) map[string]int {
		var got runJSON
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err == nil {
			err = json.Unmarshal(data, &got)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got.Database != database {
			t.Fatalf("%s holds %s's phases, want %s's", file, got.Database, database)
		}
		byName := map[string]int{}
		for _, p := range got.Phases {
			byName[p.Name] = p.Ops
		}
		return byName
	}
	engine := "SQLite"
	if strings.HasPrefix(url, "postgres") {
		engine = "PostgreSQL"
	}
	shopOps, peerOps := ops("shop.json", engine), ops("peer.json", "peer")
	var made int64
	if err := db.Table("orders").Count(&made).Error; err != nil || made != int64(shopOps[phaseWarmup]+shopOps[phaseFresh]) {
		t.Fatalf("%d orders in the shop's database (%v), want its warm-up's and fresh phase's %d", made, err, shopOps[phaseWarmup]+shopOps[phaseFresh])
	}
	if peer.created() != peerOps[phaseWarmup]+peerOps[phaseFresh] {
		t.Fatalf("the peer made %d orders, want its warm-up's and fresh phase's %d", peer.created(), peerOps[phaseWarmup]+peerOps[phaseFresh])
	}
	if shopOps[phaseFresh] == 0 || shopOps[phaseHit] == 0 || peerOps[phaseFresh] == 0 || peerOps[phaseHit] == 0 {
		t.Fatalf("shop %v, peer %v: want fresh orders and replays on both", shopOps, peerOps)
	}
	for what, bad := range map[string]config{
		"-peer-json without -peer": {Shop: srv.URL, PeerJSON: "peer.json", DatabaseURL: url, FreshOnly: true, Replays: true, Rounds: 2},
		"-peer-json without -shop": {Peer: peer.URL, PeerJSON: "peer.json", FreshOnly: true, Replays: true, Rounds: 2},
		"an odd -rounds":           {Shop: srv.URL, Peer: peer.URL, DatabaseURL: url, FreshOnly: true, Replays: true, Rounds: 3},
		"-figure":                  {Shop: srv.URL, Peer: peer.URL, DatabaseURL: url, FreshOnly: true, Replays: true, Rounds: 2, Figure: "f"},
	} {
		if err := bad.check(); err == nil {
			t.Errorf("%s beside the peer: want it refused", what)
		}
	}
}

// Beside its peer, the shop goes first in even rounds and the peer in odd ones.
func TestBesideTakesTurns(t *testing.T) {
	shopSide, peerSide := side{rep: &report{database: "shop"}}, side{rep: &report{database: "peer"}}
	for r, first := range []string{"shop", "peer", "shop", "peer"} {
		turn := inTurnBeside([]side{shopSide, peerSide}, r)
		if len(turn) != 2 || turn[0].rep.database != first || turn[0].rep == turn[1].rep {
			t.Fatalf("round %d: %s first, want %s, and each side once", r, turn[0].rep.database, first)
		}
	}
}

// The other instance and the one at home take turns going first, round by
// round, and every other step keeps its place.
func TestRoundsAlternateHomeAndOther(t *testing.T) {
	steps := (&bench{cfg: config{}}).steps()
	names := func(r int) []string {
		var n []string
		for _, s := range inTurn(steps, r) {
			n = append(n, s.name)
		}
		return n
	}
	even, odd := names(0), names(1)
	home, other := slices.Index(even, phaseHome), slices.Index(even, phaseOther)
	if home < 0 || other != home+1 {
		t.Fatalf("round 1's steps: %v", even)
	}
	want := slices.Clone(even)
	want[home], want[other] = phaseOther, phaseHome
	if !slices.Equal(odd, want) || !slices.Equal(names(2), even) || steps[home].name != phaseHome {
		t.Fatalf("rounds 1, 2, 3: %v, %v, %v", even, odd, names(2))
	}
}
