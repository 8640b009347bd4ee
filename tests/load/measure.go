package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/billing"
	settings "github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

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
	// shop's own binary to drive, over DatabaseURL (process.go).
	Replays bool
	Peer    string
	Shop    string
	// Instances: with FreshOnly, the fresh orders go to this many
	// instances over the one database, worker w to instance w mod
	// Instances, each on a pool of its own: scripts/bench's scale-out.
	Instances int
}

func defaults() config {
	return config{Phase: 6 * time.Second, Ops: 50000, Workers: 8, StormK: 8, Rounds: 3, MemoryOps: 100000, Catalog: catalogHot, StockSlots: 1,
		BareWrites: bareWritesFull, GroupCommit: settings.Default().GroupCommit, Instances: 1}
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

// phase is what one kind of work measured.
type phase struct {
	name      string
	ops       int // operations issued and finished
	requests  int // HTTP requests (or SQL transactions) among them
	failed    int
	failures  []string // the first few
	elapsed   time.Duration
	latencies []time.Duration // one per operation
	perSlice  []float64       // ops/s of each slice merged in: one a round
}

// merge adds the slice q of the same phase to p.
func (p phase) merge(q phase) phase {
	p.name = q.name
	p.ops += q.ops
	p.requests += q.requests
	p.failed += q.failed
	p.failures = append(p.failures, q.failures...)[:min(5, len(p.failures)+len(q.failures))]
	p.elapsed += q.elapsed
	p.perSlice = append(p.perSlice, q.throughput())
	p.latencies = append(p.latencies, q.latencies...)
	slices.Sort(p.latencies)
	return p
}

func (p phase) throughput() float64 {
	if p.elapsed <= 0 {
		return 0
	}
	return float64(p.ops) / p.elapsed.Seconds()
}

func (p phase) percentile(q float64) time.Duration {
	if len(p.latencies) == 0 {
		return 0
	}
	return p.latencies[min(len(p.latencies)-1, int(q*float64(len(p.latencies))))]
}

// shop is one server on a loopback port.
type shop struct {
	url    string
	server *handlers.Server
	http   *http.Server
	db     *gorm.DB     // its own connection pool, closed with it; nil when shared
	served atomic.Int64 // requests it has answered
}

// start serves the server, through handler when it is not nil.
func start(server *handlers.Server, handler http.Handler) (*shop, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &shop{url: "http://" + ln.Addr().String(), server: server}
	if handler == nil {
		handler = server
	}
	s.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.served.Add(1)
		handler.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

func (s *shop) stop(ctx context.Context) error {
	err := errors.Join(s.http.Shutdown(ctx), s.server.Close(ctx))
	if s.db != nil {
		err = errors.Join(err, database.Close(s.db))
	}
	return err
}

// bench is one run: the database, the servers, the users of each phase
// (keys and orders of different phases never share a user, so the audit
// can count each phase's rows), and what the phases hand on to later ones.
type bench struct {
	cfg      config
	db       *gorm.DB
	pool     pool // the app's connection pool, as GORM uses it
	postgres bool
	bare     bareSQL
	deps     handlers.Deps
	// once has the middleware; ceiling is the same build behind a canned
	// answer (ceilingOf). other and cold are more instances with the
	// middleware, each on a pool of its own, which only ever replay keys
	// once made, each once: other as deployed (on PostgreSQL, once pushes
	// its answers to it), cold without pushes, so that each of its replays
	// reads the database.
	once, ceiling, other, cold *shop
	// placing are the instances fresh orders go to: once, and with
	// -instances more of them.
	placing   []*shop
	client    *http.Client
	products  []models.Product
	users     map[string][]user // by phase
	orderBody string
	run       string
	began     time.Time

	mu sync.Mutex
	// made are the keys once answered, with the answer; made[:next[s]]
	// have been replayed on the instance s (other, cold).
	made []made
	next map[*shop]int
	// completed counts the operations once completed (each storm one).
	completed atomic.Int64
	// unpaid are orders to pay, per worker: those once made (warm-up and
	// fresh), and the storms'.
	unpaid map[string][][]order
	// first is the first order's answer: the size of the ceiling's, and
	// the answer the bare SQL stores.
	first answer
}

type user struct{ id, token string }

// step is a phase that runs in the rounds, and its work.
type step struct {
	name string
	work func(ctx context.Context, w, i int) (int, error)
}

// made is a key with the answer to replay, and its owner's token.
type made struct {
	token, key string
	body       []byte
}

// order is an order to pay, and its owner's token.
type order struct{ token, id string }

type report struct {
	database string
	workers  int
	stormK   int
	rounds   int
	phases   map[string]phase
	// groupCommit is the harness's setting; commits and committed, the
	// SQLite commits the rounds made and the operations they held.
	groupCommit        int
	commits, committed uint64
	audit              audit
	memory             memory
	// figured is the phase of the figure line: the fresh orders, or the
	// bare SQL with -bare-only.
	figured string
}

// The phases, in the order they are reported.
const (
	phaseWarmup   = "warm-up (with middleware)"
	phaseFresh    = "fresh order, with middleware"
	phaseBareSQL  = "bare SQL of the fresh path"
	phaseCeiling  = "ceiling (canned answer, same server and auth)"
	phaseHit      = "replay (hit)"
	phaseOther    = "replay (other instance)"
	phaseCold     = "replay (cold instance, database read)"
	phasePay      = "payment, with middleware"
	phaseStorm    = "storm"
	phasePayStorm = "payment storm"
	phaseMemory   = "fresh order, up to the memory count"
)

var reported = []string{phaseWarmup, phaseFresh, phaseBareSQL, phaseCeiling, phaseHit, phaseOther, phaseCold, phasePay, phaseStorm, phasePayStorm, phaseMemory}

// The pools of unpaid orders.
const (
	unpaidOnce  = "once"  // made with the middleware, by the warm-up and the fresh phase
	unpaidStorm = "storm" // made by the storm
)

const paymentRequest = `{"payment_method":"pm_card_visa"}`

func measure(ctx context.Context, cfg config) (*report, error) {
	_, rep, err := measureBench(ctx, cfg)
	return rep, err
}

// measureBench is measure, with the bench it ran (for the harness's tests).
func measureBench(ctx context.Context, cfg config) (*bench, *report, error) {
	db, err := cfg.open()
	if err != nil {
		return nil, nil, err
	}
	defer database.Close(db)
	if err := database.Migrate(db); err != nil {
		return nil, nil, err
	}
	if err := orders.Seed(db); err != nil {
		return nil, nil, err
	}
	b := &bench{
		cfg: cfg, db: db, pool: db.ConnPool.(pool), postgres: database.IsPostgres(db), users: map[string][]user{}, run: uuid.NewString()[:8],
		began:  time.Now().UTC().Add(-time.Second),
		client: cfg.client(), unpaid: map[string][][]order{}, next: map[*shop]int{},
	}
	b.bare = newBareSQL(b.postgres)
	if cfg.FreshOnly && cfg.BareOnly {
		return nil, nil, errors.New("-fresh-only or -bare-only, not both")
	}
	if cfg.Replays && (!cfg.FreshOnly || cfg.Catalog == catalogSpread) {
		return nil, nil, errors.New("-replays: only with -fresh-only, on the hot catalog (a replay sends the hot catalog's body)")
	}
	if cfg.Instances > 1 && (!cfg.FreshOnly || cfg.Replays) {
		return nil, nil, errors.New("-instances: more than 1 only with -fresh-only, without -replays")
	}
	if cfg.BareWrites != "" && cfg.BareWrites != bareWritesFull && cfg.BareWrites != bareWritesNone {
		return nil, nil, fmt.Errorf("-bare-writes %q: %s or %s", cfg.BareWrites, bareWritesFull, bareWritesNone)
	}
	defer b.client.CloseIdleConnections()
	for _, pool := range []string{unpaidOnce, unpaidStorm} {
		b.unpaid[pool] = make([][]order, cfg.Workers)
	}
	if err := b.setCatalog(); err != nil {
		return nil, nil, err
	}
	b.deps = shopDeps(db)
	var servers []*shop
	defer func() { _ = b.stop(servers) }()
	pushing := b.deps
	pushing.PushAnswers = true // as main runs the shop
	if b.once, err = start(handlers.NewServer(pushing), nil); err != nil {
		return nil, nil, err
	}
	servers = append(servers, b.once)
	b.placing = []*shop{b.once}
	for range cfg.Instances - 1 {
		s, err := b.startSecond(true)
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers, s)
		b.placing = append(b.placing, s)
	}
	if b.other, err = b.startSecond(true); err != nil {
		return nil, nil, err
	}
	servers = append(servers, b.other)
	for _, name := range []string{phaseWarmup, phaseFresh, phaseBareSQL, phaseCeiling, phaseStorm, phaseMemory} {
		if err := b.signUp(ctx, name); err != nil {
			return nil, nil, err
		}
	}

	rep := &report{database: "SQLite", figured: phaseFresh, workers: cfg.Workers, stormK: cfg.StormK, rounds: max(1, cfg.Rounds), phases: map[string]phase{},
		groupCommit: cfg.GroupCommit}
	if b.postgres {
		rep.database = "PostgreSQL"
	}
	if cfg.BareOnly {
		rep.figured = phaseBareSQL
	}
	rep.phases[phaseWarmup] = b.phase(ctx, phaseWarmup, b.fresh(phaseWarmup), cfg.Phase, cfg.Ops)
	if b.first.status == 0 {
		return nil, nil, fmt.Errorf("the warm-up made no order: %v", rep.phases[phaseWarmup].failures)
	}
	// The ceiling answers what the first order was answered, byte for byte.
	ceiling := handlers.NewServer(b.deps)
	if b.ceiling, err = start(ceiling, ceilingOf(ceiling, b.first)); err != nil {
		return nil, nil, err
	}
	servers = append(servers, b.ceiling)
	if b.cold, err = b.startSecond(false); err != nil {
		return nil, nil, err
	}
	servers = append(servers, b.cold)
	if err := b.connect(ctx, b.other, b.cold); err != nil {
		return nil, nil, err
	}

	steps := []step{
		{phaseFresh, b.fresh(phaseFresh)},
		{phaseBareSQL, func(ctx context.Context, w, i int) (int, error) {
			return 1, b.bareFresh(ctx, b.users[phaseBareSQL][w].id)
		}},
		{phaseCeiling, b.toCeiling},
		{phaseHit, b.replayHit},
		{phaseOther, b.replayOnce(b.other)},
		{phaseCold, b.replayOnce(b.cold)},
		{phasePay, b.pay},
	}
	switch {
	case cfg.FreshOnly && cfg.Replays:
		steps = []step{steps[0], {phaseHit, b.replayHit}}
	case cfg.FreshOnly:
		steps = steps[:1]
	case cfg.BareOnly:
		steps = steps[1:2]
	}
	if err := b.rounds(ctx, rep, steps); err != nil {
		return nil, nil, err
	}
	if !cfg.FreshOnly && !cfg.BareOnly {
		rep.phases[phaseStorm] = b.phase(ctx, phaseStorm, b.stormOrder, cfg.Phase, cfg.Ops)
		rep.phases[phasePayStorm] = b.phase(ctx, phasePayStorm, b.stormPayment, cfg.Phase, cfg.Ops)
	}
	if cfg.MemoryOps > 0 && !cfg.FreshOnly && !cfg.BareOnly {
		rep.memory.before = heapAfterGC()
		left := max(0, cfg.MemoryOps-int(b.completed.Load()))
		rep.phases[phaseMemory] = b.phase(ctx, phaseMemory, b.fresh(phaseMemory), 5*time.Minute, left)
		rep.memory.measure(b)
	}
	stopped := servers
	servers = nil
	if err := b.stop(stopped); err != nil {
		return nil, nil, err
	}
	rep.audit, err = b.audit(ctx, rep)
	return b, rep, err
}

// rounds runs the steps interleaved, in rep.rounds slices of the phase's
// time and operations each, and counts the SQLite commits they made.
func (b *bench) rounds(ctx context.Context, rep *report, steps []step) error {
	commits, operations := b.commitStats()
	rounds, cfg := rep.rounds, b.cfg
	slice, sliceOps := cfg.Phase/time.Duration(rounds), cfg.Ops/rounds
	for r := range rounds {
		for _, s := range steps {
			maxOps := sliceOps
			if on := map[string]*shop{phaseOther: b.other, phaseCold: b.cold}[s.name]; on != nil {
				// Each key is replayed once there: what is left is shared
				// out between the rounds to come.
				b.mu.Lock()
				maxOps = min(maxOps, (len(b.made)-b.next[on])/(rounds-r))
				b.mu.Unlock()
			}
			run := func() { rep.phases[s.name] = rep.phases[s.name].merge(b.phase(ctx, s.name, s.work, slice, maxOps)) }
			if r == 0 && s.name == cfg.ProfilePhase && cfg.CPUProfile != "" {
				if err := profiled(cfg.CPUProfile, run); err != nil {
					return err
				}
				continue
			}
			run()
		}
	}
	c, o := b.commitStats()
	rep.commits, rep.committed = c-commits, o-operations
	return nil
}

// commitStats are the SQLite commits of the harness's pool so far: none
// when it drives the peer, and has no pool.
func (b *bench) commitStats() (commits, operations uint64) {
	if b.db == nil {
		return 0, 0
	}
	return database.CommitStats(b.db)
}

// profiled runs work under the CPU profiler, writing the profile to path.
func profiled(path string, work func()) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return errors.Join(err, f.Close())
	}
	work()
	pprof.StopCPUProfile()
	return f.Close()
}

// startSecond starts another instance with the middleware: over the same
// database, on a connection pool of its own, as another process would be;
// taking the answers once pushes, or not.
func (b *bench) startSecond(push bool) (*shop, error) {
	db, err := b.cfg.open()
	if err != nil {
		return nil, err
	}
	deps := b.deps
	deps.DB, deps.Payments, deps.PushAnswers = db, simulated(db), push
	s, err := start(handlers.NewServer(deps), nil)
	if err != nil {
		return nil, errors.Join(err, database.Close(db))
	}
	s.db = db
	return s, nil
}

// stop stops the servers, which flushes the replay counts they keep.
func (b *bench) stop(servers []*shop) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.stop(ctx))
	}
	return errors.Join(errs...)
}

// fresh places an order with a new key on the instance with the middleware
// (with -instances, on worker w's instance), and keeps the key for the replays and the order for the payments.
func (b *bench) fresh(name string) func(ctx context.Context, w, i int) (int, error) {
	return func(ctx context.Context, w, i int) (int, error) {
		u, k := b.users[name][w], uuid.NewString()
		a, err := b.post(ctx, b.placing[w%len(b.placing)].url+"/api/v1/orders", u.token, k, b.freshBody())
		if err == nil && a.status != http.StatusCreated {
			err = fmt.Errorf("order: %d %s", a.status, a.body)
		}
		if err != nil {
			return 1, err
		}
		b.completed.Add(1)
		if name == phaseMemory {
			return 1, nil // nothing kept: the harness's memory is measured too
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.first.status == 0 {
			b.first = a
		}
		b.made = append(b.made, made{u.token, k, a.body})
		b.unpaid[unpaidOnce][w] = append(b.unpaid[unpaidOnce][w], order{u.token, a.id()})
		return 1, nil
	}
}

// toCeiling sends what a replay sends, to the canned answer.
func (b *bench) toCeiling(ctx context.Context, w, i int) (int, error) {
	a, err := b.post(ctx, b.ceiling.url+ceilingPath, b.users[phaseCeiling][w].token, uuid.NewString(), b.orderBody)
	if err == nil && (a.status != b.first.status || len(a.body) != len(b.first.body)) {
		err = fmt.Errorf("ceiling: %d, %d bytes; want %d, %d bytes", a.status, len(a.body), b.first.status, len(b.first.body))
	}
	return 1, err
}

// replayHit replays, on the instance that made them, the keys it made, over
// and over.
func (b *bench) replayHit(ctx context.Context, w, i int) (int, error) {
	b.mu.Lock()
	k := b.made[i%len(b.made)]
	b.mu.Unlock()
	return 1, b.replay(ctx, b.once, k)
}

// replayOnce replays each key once on the instance s; the phase ends when
// every key has been.
func (b *bench) replayOnce(s *shop) func(ctx context.Context, w, i int) (int, error) {
	return func(ctx context.Context, w, i int) (int, error) {
		b.mu.Lock()
		if b.next[s] == len(b.made) {
			b.mu.Unlock()
			return 0, errNothingLeft
		}
		k := b.made[b.next[s]]
		b.next[s]++
		b.mu.Unlock()
		return 1, b.replay(ctx, s, k)
	}
}

// replay checks that the answer is the original one, marked as replayed
// (the peer marks none: the body, with the order's id, is the original's).
func (b *bench) replay(ctx context.Context, s *shop, k made) error {
	a, err := b.post(ctx, s.url+"/api/v1/orders", k.token, k.key, b.orderBody)
	marked := a.replayed || b.cfg.Peer != ""
	if err == nil && (a.status != http.StatusCreated || !marked || !bytes.Equal(a.body, k.body)) {
		err = fmt.Errorf("replay: %d replayed=%v %s", a.status, a.replayed, a.body)
	}
	return err
}

// pay pays the next unpaid order once made, with a new key.
func (b *bench) pay(ctx context.Context, w, i int) (int, error) {
	o, ok := b.nextUnpaid(unpaidOnce, w)
	if !ok {
		return 0, errNothingLeft
	}
	a, err := b.post(ctx, b.once.url+"/api/v1/orders/"+o.id+"/payments", o.token, uuid.NewString(), paymentRequest)
	if err == nil && a.status != http.StatusCreated {
		err = fmt.Errorf("payment: %d %s", a.status, a.body)
	}
	if err == nil {
		b.completed.Add(1)
	}
	return 1, err
}

func (b *bench) nextUnpaid(pool string, w int) (order, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	orders := b.unpaid[pool][w]
	if len(orders) == 0 {
		return order{}, false
	}
	b.unpaid[pool][w] = orders[1:]
	return orders[0], true
}

// stormOrder sends one order k times at once and keeps it for the payment
// storm.
func (b *bench) stormOrder(ctx context.Context, w, i int) (int, error) {
	u := b.users[phaseStorm][w]
	id, err := b.storm(ctx, b.once.url+"/api/v1/orders", u.token, b.orderBody)
	if err == nil {
		b.completed.Add(1)
		b.mu.Lock()
		b.unpaid[unpaidStorm][w] = append(b.unpaid[unpaidStorm][w], order{u.token, id})
		b.mu.Unlock()
	}
	return b.cfg.StormK, err
}

// stormPayment pays one order the storm made, k times at once.
func (b *bench) stormPayment(ctx context.Context, w, i int) (int, error) {
	o, ok := b.nextUnpaid(unpaidStorm, w)
	if !ok {
		return 0, errNothingLeft
	}
	_, err := b.storm(ctx, b.once.url+"/api/v1/orders/"+o.id+"/payments", o.token, paymentRequest)
	if err == nil {
		b.completed.Add(1)
	}
	return b.cfg.StormK, err
}

// errNothingLeft ends a worker's phase early: it has no more work.
var errNothingLeft = errors.New("nothing left")

// phase runs work from every worker until the phase's time or operations
// are used up, then waits for what is in flight.
func (b *bench) phase(ctx context.Context, name string, work func(ctx context.Context, w, i int) (int, error), d time.Duration, maxOps int) phase {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		p        = phase{name: name}
		wg       sync.WaitGroup
		deadline = time.Now().Add(d)
	)
	start := time.Now()
	for w := range b.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				if i >= maxOps {
					return
				}
				t0 := time.Now()
				requests, err := work(ctx, w, i)
				took := time.Since(t0)
				if errors.Is(err, errNothingLeft) {
					return
				}
				mu.Lock()
				p.ops++
				p.requests += requests
				p.latencies = append(p.latencies, took)
				if err != nil {
					p.failed++
					if len(p.failures) < 5 {
						p.failures = append(p.failures, err.Error())
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.elapsed = time.Since(start)
	slices.Sort(p.latencies)
	return p
}

type answer struct {
	status   int
	replayed bool
	header   http.Header // the headers a replay repeats
	body     []byte
}

// id is the id of what the answer created, from its Location.
func (a answer) id() string {
	loc := a.header.Get("Location")
	return loc[strings.LastIndexByte(loc, '/')+1:]
}

func (b *bench) post(ctx context.Context, url, token, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" { // the peer's requests have none
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	header := http.Header{"Content-Type": resp.Header.Values("Content-Type"), "Location": resp.Header.Values("Location")}
	return answer{resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", header, data}, err
}

// storm sends one operation k times at once, behind a barrier, and checks
// that exactly one answer is original, every other one a replay of it. It
// returns the id of what was created.
func (b *bench) storm(ctx context.Context, url, token, body string) (string, error) {
	k := uuid.NewString()
	answers := make([]answer, b.cfg.StormK)
	errs := make([]error, b.cfg.StormK)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			answers[i], errs[i] = b.post(ctx, url, token, k, body)
		}()
	}
	close(gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	originals := 0
	for _, a := range answers {
		if a.status != http.StatusCreated || !bytes.Equal(a.body, answers[0].body) {
			return "", fmt.Errorf("storm: %d %s, first %d %s", a.status, a.body, answers[0].status, answers[0].body)
		}
		if !a.replayed {
			originals++
		}
	}
	if originals != 1 {
		return "", fmt.Errorf("storm: %d original answers, want 1", originals)
	}
	var created struct{ ID string }
	if err := json.Unmarshal(answers[0].body, &created); err != nil || created.ID == "" {
		return "", fmt.Errorf("storm: no id in %s", answers[0].body)
	}
	return created.ID, nil
}

func (b *bench) signUp(ctx context.Context, name string) error {
	accounts := accounts.Accounts{DB: b.db, BcryptCost: bcrypt.MinCost}
	for w := range b.cfg.Workers {
		// A run of its own, so that a database used before does not collide.
		email := fmt.Sprintf("w%d.%s.%s@load.example", w, strings.NewReplacer(" ", "-", ",", "", "(", "", ")", "").Replace(name), b.run)
		u, err := accounts.SignUp(ctx, email, "correct horse")
		if err != nil {
			return fmt.Errorf("sign up %s: %w", email, err)
		}
		token, err := accounts.IssueToken(ctx, u, time.Now().Add(24*time.Hour))
		if err != nil {
			return err
		}
		b.users[name] = append(b.users[name], user{u.ID, token})
	}
	return nil
}

// shopDeps are an instance's over db, with the settings main runs with
// when none is set, and one SESSION_SECRET for every instance, as a
// deployment has (pushes are signed with a key derived from it).
func shopDeps(db *gorm.DB) handlers.Deps {
	def := settings.Default()
	return handlers.Deps{
		DB: db, Payments: simulated(db), TTL: def.IdempotencyTTL, Lease: def.IdempotencyLease, Wait: def.IdempotencyWait,
		ReplayCacheBytes: def.ReplayCacheBytes(), OrderExpiry: def.OrderExpiry, TokenTTL: def.TokenTTL,
		TokenCacheTTL: def.TokenCacheTTL, SessionIdle: def.SessionIdle, SessionMaxAge: def.SessionMaxAge,
		BcryptCost: bcrypt.MinCost, Logger: slog.New(slog.DiscardHandler), SessionSecret: []byte(uuid.NewString()),
	}
}

// simulated is a payments service on the simulated provider over db, as
// main builds one: the provider answers at once, so the phases measure the
// shop.
func simulated(db *gorm.DB) *billing.Service {
	def := settings.Default()
	return billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db, AuthExpiry: def.AuthExpiry},
		Lease: def.IdempotencyLease, AttemptTimeout: def.AttemptTimeout(), RollForward: def.RollForward,
		AuthExpiry: def.AuthExpiry, Logger: slog.New(slog.DiscardHandler)})
}
