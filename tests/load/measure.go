package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

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
	// once made (see eachOnce): other as deployed (on PostgreSQL, once
	// pushes its answers to it), cold without pushes, so that each of its
	// replays reads the database.
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
	// made are the keys once answered, with the answer; next[s] is the
	// next of them to replay on the instance s (once, other, cold).
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
	phaseHome     = "replay (at home, the keys in turn)"
	phaseOther    = "replay (other instance)"
	phaseCold     = "replay (cold instance, database read)"
	phasePay      = "payment, with middleware"
	phaseStorm    = "storm"
	phasePayStorm = "payment storm"
	phaseMemory   = "fresh order, up to the memory count"
)

var reported = []string{phaseWarmup, phaseFresh, phaseBareSQL, phaseCeiling, phaseHit, phaseHome, phaseOther, phaseCold, phasePay, phaseStorm, phasePayStorm, phaseMemory}

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
	if err := cfg.check(); err != nil {
		return nil, nil, err
	}
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
	b := newBench(cfg, db)
	b.pool, b.bare = db.ConnPool.(pool), newBareSQL(b.postgres)
	defer b.client.CloseIdleConnections()
	if err := b.prepare(ctx, phaseWarmup, phaseFresh, phaseBareSQL, phaseCeiling, phaseStorm, phaseMemory); err != nil {
		return nil, nil, err
	}
	b.deps = shopDeps(db)
	var servers []*shop
	defer func() { _ = b.stop(servers) }()
	servers, err = b.startInstances()
	if err != nil {
		return nil, nil, err
	}
	rep := b.newReport()
	rep.groupCommit = cfg.GroupCommit
	if cfg.BareOnly {
		rep.figured = phaseBareSQL
	}
	if err := b.warmUp(ctx, rep); err != nil {
		return nil, nil, err
	}
	more, err := b.startReplayers(ctx)
	servers = append(servers, more...)
	if err != nil {
		return nil, nil, err
	}
	if err := b.rounds(ctx, rep, b.steps()); err != nil {
		return nil, nil, err
	}
	b.stormsAndMemory(ctx, rep)
	stopped := servers
	servers = nil
	if err := b.stop(stopped); err != nil {
		return nil, nil, err
	}
	rep.audit, err = b.audit(ctx, rep)
	return b, rep, err
}

// newBench is a run over db (nil: the peer's, which the harness does not
// open): no user yet, a run id of its own (for the users' emails), the
// pools of unpaid orders empty.
func newBench(cfg config, db *gorm.DB) *bench {
	b := &bench{cfg: cfg, db: db, users: map[string][]user{}, run: uuid.NewString()[:8], began: time.Now().UTC().Add(-time.Second),
		client: cfg.client(), unpaid: map[string][][]order{}, next: map[*shop]int{}}
	if db != nil {
		b.postgres = database.IsPostgres(db)
	}
	for _, pool := range []string{unpaidOnce, unpaidStorm} {
		b.unpaid[pool] = make([][]order, cfg.Workers)
	}
	return b
}

// prepare writes straight to the database what the shop serves the run
// from, in-process or not: the catalog's stock (and its slots), and the
// phases' users with their tokens.
func (b *bench) prepare(ctx context.Context, phases ...string) error {
	if err := b.setCatalog(); err != nil {
		return err
	}
	for _, name := range phases {
		if err := b.signUp(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// newReport is the run's report, its phases to come.
func (b *bench) newReport() *report {
	rep := &report{database: "SQLite", figured: phaseFresh, workers: b.cfg.Workers, stormK: b.cfg.StormK, rounds: max(1, b.cfg.Rounds), phases: map[string]phase{}}
	switch {
	case b.db == nil:
		rep.database = "peer"
	case b.postgres:
		rep.database = "PostgreSQL"
	}
	return rep
}

// warmUp runs the warm-up's fresh orders, and fails if it made none: its
// first answer is what the ceiling and the bare SQL answer.
func (b *bench) warmUp(ctx context.Context, rep *report) error {
	rep.phases[phaseWarmup] = b.phase(ctx, phaseWarmup, b.fresh(phaseWarmup), b.cfg.Phase, b.cfg.Ops)
	if b.first.status == 0 {
		return fmt.Errorf("the warm-up made no order on %s: %v", b.once.url, rep.phases[phaseWarmup].failures)
	}
	return nil
}

// steps are the phases the rounds interleave: all of them, or those of
// -fresh-only (with -replays) or -bare-only.
func (b *bench) steps() []step {
	steps := []step{
		{phaseFresh, b.fresh(phaseFresh)},
		{phaseBareSQL, func(ctx context.Context, w, i int) (int, error) {
			return 1, b.bareFresh(ctx, b.users[phaseBareSQL][w].id)
		}},
		{phaseCeiling, b.toCeiling},
		{phaseHit, b.replayHit},
		{phaseHome, b.replayInTurn(b.once)},
		{phaseOther, b.replayInTurn(b.other)},
		{phaseCold, b.replayInTurn(b.cold)},
		{phasePay, b.pay},
	}
	switch {
	case b.cfg.FreshOnly && b.cfg.Replays:
		return []step{steps[0], {phaseHit, b.replayHit}}
	case b.cfg.FreshOnly:
		return steps[:1]
	case b.cfg.BareOnly:
		return steps[1:2]
	}
	return steps
}

// stormsAndMemory runs, after the rounds, the storms, then fresh orders
// until the instance with the middleware has completed -memory operations,
// and measures its memory; neither with -fresh-only or -bare-only.
func (b *bench) stormsAndMemory(ctx context.Context, rep *report) {
	cfg := b.cfg
	if cfg.FreshOnly || cfg.BareOnly {
		return
	}
	rep.phases[phaseStorm] = b.phase(ctx, phaseStorm, b.stormOrder, cfg.Phase, cfg.Ops)
	rep.phases[phasePayStorm] = b.phase(ctx, phasePayStorm, b.stormPayment, cfg.Phase, cfg.Ops)
	if cfg.MemoryOps > 0 {
		rep.memory.before = heapAfterGC()
		left := max(0, cfg.MemoryOps-int(b.completed.Load()))
		rep.phases[phaseMemory] = b.phase(ctx, phaseMemory, b.fresh(phaseMemory), 5*time.Minute, left)
		rep.memory.measure(b)
	}
}

// countsFlushed is past the time an instance keeps replay counts before it writes them.
const countsFlushed = 1500 * time.Millisecond

// rounds runs the steps interleaved, in rep.rounds slices of the phase's
// time and operations each, and counts the SQLite commits they made.
func (b *bench) rounds(ctx context.Context, rep *report, steps []step) error {
	commits, operations := b.commitStats()
	rounds, cfg := rep.rounds, b.cfg
	slice, sliceOps := cfg.Phase/time.Duration(rounds), cfg.Ops/rounds
	for r := range rounds {
		for _, s := range inTurn(steps, r) {
			maxOps := sliceOps
			on := map[string]*shop{phaseHome: b.once, phaseOther: b.other, phaseCold: b.cold}[s.name]
			if on != nil {
				// Where each key is replayed once, what is left is shared out
				// between the rounds to come. The replay counts of the phase
				// before reach the rows a flush (a second) later: not within
				// this phase.
				if b.eachOnce(on) {
					b.mu.Lock()
					maxOps = min(maxOps, (len(b.made)-b.next[on])/(rounds-r))
					b.mu.Unlock()
				}
				time.Sleep(countsFlushed)
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

// inTurn is round r's steps: in every other round the other instance
// replays before the instance at home, so that the two compared never run in
// one order only (as the shop beside its peer alternates who goes first).
func inTurn(steps []step, r int) []step {
	home := slices.IndexFunc(steps, func(s step) bool { return s.name == phaseHome })
	other := slices.IndexFunc(steps, func(s step) bool { return s.name == phaseOther })
	if r%2 == 0 || home < 0 || other < 0 {
		return steps
	}
	steps = slices.Clone(steps)
	steps[home], steps[other] = steps[other], steps[home]
	return steps
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

// replayInTurn replays the keys in turn on the instance s: each once, and the phase ends when
// every key has been (see eachOnce); or over and over.
func (b *bench) replayInTurn(s *shop) func(ctx context.Context, w, i int) (int, error) {
	return func(ctx context.Context, w, i int) (int, error) {
		b.mu.Lock()
		if b.next[s] == len(b.made) {
			if b.eachOnce(s) {
				b.mu.Unlock()
				return 0, errNothingLeft
			}
			b.next[s] = 0
		}
		k := b.made[b.next[s]]
		b.next[s]++
		b.mu.Unlock()
		return 1, b.replay(ctx, s, k)
	}
}

// eachOnce is whether the keys are replayed each once on s: on the cold instance, whose every
// replay reads the key row; on SQLite, where the other instance reads it the first time (no
// pushes) and the instance at home is measured alike. On PostgreSQL a retry on the other
// instance, which the answer was pushed to, is a memory hit every time, as at home: the
// keys are replayed over and over there, until the slice's time or operations run out.
func (b *bench) eachOnce(s *shop) bool { return s == b.cold || !b.postgres }

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
