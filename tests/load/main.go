// Command load measures what the idempotency middleware costs. It starts
// the shop on 127.0.0.1 over one database: with the middleware, behind a
// canned answer that the shop authenticates (the ceiling of the stack:
// ceiling.go), and two more instances with the middleware that only replay
// (the other instance, and the cold one that has seen no key). It drives
// them over real HTTP from many goroutines: fresh orders, replays on the
// instance that made the keys and on the other (the keys in turn: each once
// on SQLite, over and over on PostgreSQL, which pushes answers there) and,
// each key once, on the cold one, payments, and storms (one operation sent k times at once). It also
// runs the bare SQL of the fresh path (the key read, then one transaction
// with the claim, the order, its lines and the completion) straight on the
// same pool, as the database's limit for the work. It prints throughput,
// latency percentiles, the ratios, and an exactly-once audit read back from
// the database. Each phase stops issuing work after its time or -ops,
// whichever comes first, and lets what is in flight finish.
//
//	go run ./tests/load                                  # SQLite in a temporary directory
//	go run ./tests/load -db 'postgres://…/loaddb?sslmode=disable'
//	go run ./tests/load -shop http://127.0.0.1:8080 -db data/shop.db -fresh-only -replays   # the shop's binary, running
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gorm.io/gorm"

	settings "github.com/shop/shop/config"
	"github.com/shop/shop/database"
)

func main() {
	cfg := defaults()
	flag.StringVar(&cfg.DatabaseURL, "db", "", "database: a postgres:// URL (its tables are created, and left behind) or an SQLite path; empty: SQLite in a temporary directory")
	flag.DurationVar(&cfg.Phase, "phase", cfg.Phase, "how long each phase issues work")
	flag.IntVar(&cfg.Ops, "ops", cfg.Ops, "the most operations a phase issues")
	flag.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent clients")
	flag.IntVar(&cfg.StormK, "k", cfg.StormK, "copies of each operation a storm sends at once")
	flag.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds in which the compared phases run interleaved, each a slice of -phase and -ops")
	flag.IntVar(&cfg.MemoryOps, "memory", cfg.MemoryOps, "after the storms, fresh orders until this many operations completed on the instance with the middleware, then its memory; 0: none")
	flag.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the first slice of the phase -profile names")
	flag.StringVar(&cfg.ProfilePhase, "profile", phaseFresh, "the phase -cpuprofile profiles, e.g. \""+phaseHit+"\"")
	flag.StringVar(&cfg.Markdown, "markdown", "", "also write the results as a Markdown section to this file")
	flag.StringVar(&cfg.Label, "label", "", "the database's name in the Markdown section and the JSON")
	flag.StringVar(&cfg.Catalog, "catalog", cfg.Catalog, "what orders buy: hot (the same two products, as every phase) or spread (two of 64 products at random; only with -fresh-only or -bare-only)")
	flag.IntVar(&cfg.StockSlots, "stock-slots", cfg.StockSlots, "split the hot catalog's products over this many stock slots, as `shop stock split` does for a flash sale; 1: one row each")
	flag.BoolVar(&cfg.FreshOnly, "fresh-only", false, "run the warm-up and the fresh orders alone, in their rounds")
	flag.BoolVar(&cfg.BareOnly, "bare-only", false, "run the warm-up and the bare SQL of the fresh path alone, in their rounds; -figure is the bare SQL's")
	flag.StringVar(&cfg.BareWrites, "bare-writes", cfg.BareWrites, "what the bare SQL writes: full (all a fresh order writes) or none (no stock reservation, no outbox event)")
	flag.StringVar(&cfg.Figure, "figure", "", "also write the fresh orders' (with -bare-only, the bare SQL's) operations, seconds, p50 and p99 (ms), and the SQLite commits per order, as one line to this file")
	flag.IntVar(&cfg.GroupCommit, "group-commit", cfg.GroupCommit, "the most atomic operations one SQLite commit holds, on every pool the harness opens; 1: group commit off")
	flag.BoolVar(&cfg.Replays, "replays", false, "with -fresh-only, also replay the fresh orders' keys on the instance that made them (replay (hit)), in the same rounds")
	flag.StringVar(&cfg.Peer, "peer", "", "drive the peer at this base URL (../shared/peer-fiber) instead of the shop, as -fresh-only -replays drives the shop (peer.go); with -shop, both in slices that take turns (beside.go)")
	flag.DurationVar(&cfg.SlicePause, "slice-pause", cfg.SlicePause, "with -shop and -peer: the pause before each slice, in which neither is driven")
	flag.StringVar(&cfg.PeerJSON, "peer-json", "", "with -shop and -peer: also write the peer's phases as JSON to this file, as -json the shop's")
	flag.StringVar(&cfg.Shop, "shop", "", "drive the shop's own binary running at this base URL over -db (the same database), as -peer drives the peer, with -fresh-only -replays (process.go)")
	flag.IntVar(&cfg.Instances, "instances", cfg.Instances, "with -fresh-only: the instances over the one database the fresh orders go to (worker w to instance w mod n), each on a pool of its own")
	flag.StringVar(&cfg.JSON, "json", "", "also write each phase's figures, and the fresh orders' latencies, as JSON to this file (for the charts)")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		dir, err := os.MkdirTemp("", "shop-load-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.DatabaseURL = filepath.Join(dir, "shop.db")
	}
	if err := loopbackOnly(cfg.DatabaseURL); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if cfg.Shop != "" && cfg.Peer != "" {
		return runBeside(ctx, cfg, out)
	}
	measured := measure
	switch {
	case cfg.Peer != "":
		measured = measurePeer
	case cfg.Shop != "":
		measured = measureProcess
	}
	rep, err := measured(ctx, cfg)
	if err != nil {
		return err
	}
	return written(cfg, rep, out)
}

// runBeside measures the shop beside its peer (measureBeside), and prints and writes both.
func runBeside(ctx context.Context, cfg config, out io.Writer) error {
	shopRep, peerRep, err := measureBeside(ctx, cfg)
	if shopRep == nil || peerRep == nil {
		return err
	}
	peerCfg := config{JSON: cfg.PeerJSON, Label: "peer"}
	return errors.Join(err, written(cfg, shopRep, out), written(peerCfg, peerRep, out))
}

// written prints the report to out, writes the files cfg names, and fails if its audit found a problem.
func written(cfg config, rep *report, out io.Writer) error {
	rep.print(out)
	if cfg.Markdown != "" {
		if err := os.WriteFile(cfg.Markdown, []byte(rep.markdown(cfg.Label)), 0o644); err != nil {
			return err
		}
	}
	if cfg.Figure != "" {
		if err := os.WriteFile(cfg.Figure, []byte(rep.figure()), 0o644); err != nil {
			return err
		}
	}
	if cfg.JSON != "" {
		if err := rep.writeJSON(cfg.JSON, cfg.Label); err != nil {
			return err
		}
	}
	if problems := rep.audit.problems(); len(problems) > 0 {
		return errors.New("audit failed: " + fmt.Sprint(problems))
	}
	return nil
}

// config is the run's settings, the flags main reads.
type config struct {
	DatabaseURL string
	Phase       time.Duration
	Ops         int
	Workers     int
	StormK      int
	// Rounds: the compared phases (every phase but the warm-up and the
	// storms) run interleaved in this many slices, so that a machine
	// getting busier or the tables growing does not favour one of them.
	Rounds       int
	CPUProfile   string // of the first slice of ProfilePhase
	ProfilePhase string
	// MemoryOps: after the storms, fresh orders until the instance with the
	// middleware has completed this many operations, then its memory.
	MemoryOps       int
	Markdown, Label string
	// Catalog: what the orders buy (catalog.go). FreshOnly: the warm-up
	// and the fresh orders alone, in their rounds (no other phase, no
	// storms, no memory), whose figure goes to Figure: scripts/bench's
	// shop on the hot and the spread catalog, and its group commit on and
	// off. BareOnly: the warm-up and the bare SQL of the fresh path alone,
	// whose figure goes to Figure instead; BareWrites: what the bare SQL
	// writes (bare.go), everything a fresh order writes or no reservation
	// and no outbox event: scripts/bench's price of stock and events, in
	// the database.
	Catalog    string
	StockSlots int // the hot catalog's products split over this many stock slots (shop stock split)
	FreshOnly  bool
	BareOnly   bool
	BareWrites string
	Figure     string
	// GroupCommit: the most atomic operations one SQLite commit holds, for
	// every pool the harness opens (database.Options); 0 or 1 is group
	// commit off, and defaults() starts from SQLITE_GROUP_COMMIT's. JSON: the file the phases go to for the charts.
	GroupCommit int
	JSON        string
	// Replays: with FreshOnly, the replays of the fresh orders' keys on
	// the instance that made them run in the same rounds. Peer: the base
	// URL of the peer to drive instead of the shop (peer.go). Both for
	// scripts/bench's shop beside its peer. Shop: the base URL of the
	// shop's own binary to drive, over DatabaseURL (process.go); with
	// Peer, both are driven in turn (beside.go), and PeerJSON is the file
	// the peer's phases go to.
	Replays  bool
	Peer     string
	Shop     string
	PeerJSON string
	// SlicePause: with Shop and Peer, the pause before each slice (beside.go).
	SlicePause time.Duration
	// Instances: with FreshOnly, the fresh orders go to this many
	// instances over the one database, worker w to instance w mod
	// Instances, each on a pool of its own: scripts/bench's scale-out.
	Instances int
}

func defaults() config {
	return config{Phase: 6 * time.Second, Ops: 50000, Workers: 8, StormK: 8, Rounds: 3, MemoryOps: 100000, Catalog: catalogHot, StockSlots: 1,
		BareWrites: bareWritesFull, GroupCommit: settings.Default().GroupCommit, Instances: 1, SlicePause: countsFlushed}
}

// open opens a connection pool on the database, with the group commit asked.
func (c config) open() (*gorm.DB, error) {
	return database.Open(c.DatabaseURL, database.Options{GroupCommit: c.GroupCommit})
}

// client is the one HTTP client every phase sends through.
func (c config) client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 4 * c.Workers * c.StormK, MaxIdleConnsPerHost: 2 * c.Workers * c.StormK,
	}}
}

// check refuses the flags that do not go together, and -shop without the
// database it runs over.
func (c config) check() error {
	switch {
	case c.PeerJSON != "" && (c.Peer == "" || c.Shop == ""):
		return errors.New("-peer-json: only with -shop and -peer")
	case c.Peer != "" && c.Shop != "" && (c.Rounds%2 != 0 || c.CPUProfile != "" || c.Markdown != "" || c.Figure != ""):
		return errors.New("-shop with -peer: an even -rounds (each goes first as often), and no -cpuprofile, -markdown or -figure")
	case c.Shop != "" && (!c.FreshOnly || !c.Replays || c.Catalog == catalogSpread || c.Instances > 1):
		return errors.New("-shop: only with -fresh-only -replays, on the hot catalog, one instance")
	case c.Shop != "" && c.DatabaseURL == "":
		return errors.New("-shop: -db names the database the shop runs over, which the harness prepares and audits")
	case c.FreshOnly && c.BareOnly:
		return errors.New("-fresh-only or -bare-only, not both")
	case c.Replays && (!c.FreshOnly || c.Catalog == catalogSpread):
		return errors.New("-replays: only with -fresh-only, on the hot catalog (a replay sends the hot catalog's body)")
	case c.Instances > 1 && (!c.FreshOnly || c.Replays):
		return errors.New("-instances: more than 1 only with -fresh-only, without -replays")
	case c.BareWrites != "" && c.BareWrites != bareWritesFull && c.BareWrites != bareWritesNone:
		return fmt.Errorf("-bare-writes %q: %s or %s", c.BareWrites, bareWritesFull, bareWritesNone)
	}
	return nil
}

// loopbackOnly refuses a database anywhere but on this machine: the
// harness drives as much load as it can.
func loopbackOnly(databaseURL string) error {
	if !strings.Contains(databaseURL, "://") {
		return nil // an SQLite file
	}
	u, err := url.Parse(databaseURL)
	if err != nil {
		return fmt.Errorf("-db: %w", err)
	}
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "::1":
		return nil
	}
	return fmt.Errorf("-db: the harness only talks to 127.0.0.1, not %q", u.Hostname())
}
