package main

import (
	"bytes"
	"context"
	"database/sql"
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/shop/shop/handlers"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

type config struct {
	DatabaseURL string
	Phase       time.Duration
	Ops         int
	Workers     int
	StormK      int
	// Rounds: the compared phases (fresh with and without the middleware,
	// bare SQL) run interleaved in this many slices, so that a machine
	// getting busier or the tables growing does not favour one of them.
	Rounds          int
	CPUProfile      string // of the first slice of fresh orders with the middleware
	Markdown, Label string
}

func defaults() config {
	return config{Phase: 6 * time.Second, Ops: 50000, Workers: 8, StormK: 8, Rounds: 3}
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
}

// merge adds the slice q of the same phase to p.
func (p phase) merge(q phase) phase {
	p.name = q.name
	p.ops += q.ops
	p.requests += q.requests
	p.failed += q.failed
	p.failures = append(p.failures, q.failures...)[:min(5, len(p.failures)+len(q.failures))]
	p.elapsed += q.elapsed
	p.latencies = append(p.latencies, q.latencies...)
	slices.Sort(p.latencies)
	return p
}

func (p phase) throughput() float64 { return float64(p.ops) / p.elapsed.Seconds() }

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
}

func start(server *handlers.Server) (*shop, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &shop{url: "http://" + ln.Addr().String(), server: server}
	s.http = &http.Server{Handler: s.server, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

func (s *shop) stop(ctx context.Context) error {
	return errors.Join(s.http.Shutdown(ctx), s.server.Close(ctx))
}

// bench is one run: the database, both servers, and the users of each
// phase (keys and orders of different phases never share a user, so the
// audit can count each phase's rows).
type bench struct {
	cfg       config
	db        *gorm.DB
	sqlDB     *sql.DB
	postgres  bool
	once, tx  *shop
	client    *http.Client
	products  []string
	users     map[string][]user // by phase
	orderBody string
	run       string
	began     time.Time
}

type user struct{ id, token string }

type report struct {
	database string
	workers  int
	stormK   int
	phases   map[string]phase
	audit    audit
}

// The phases, in the order they run.
const (
	phaseWarmup  = "warm-up (with middleware)"
	phaseFresh   = "fresh order, with middleware"
	phasePlain   = "fresh order, without middleware"
	phaseBareSQL = "bare SQL of the fresh path"
	phaseReplay  = "replay"
	phaseStorm   = "storm"
	phasePay     = "payment storm (provider latency 0)"
)

func measure(ctx context.Context, cfg config) (*report, error) {
	db, err := models.Open(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	defer sqlDB.Close()
	if err := handlers.Migrate(db); err != nil {
		return nil, err
	}
	if err := models.Seed(db); err != nil {
		return nil, err
	}
	b := &bench{
		cfg: cfg, db: db, sqlDB: sqlDB, postgres: models.IsPostgres(db), users: map[string][]user{}, run: uuid.NewString()[:8],
		began: time.Now().UTC().Add(-time.Second),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 4 * cfg.Workers * cfg.StormK, MaxIdleConnsPerHost: 2 * cfg.Workers * cfg.StormK,
		}},
	}
	defer b.client.CloseIdleConnections()
	if err := db.Model(&models.Product{}).Order("sku").Limit(2).Pluck("id", &b.products).Error; err != nil || len(b.products) < 2 {
		return nil, fmt.Errorf("catalog: %v", err)
	}
	b.orderBody = fmt.Sprintf(`{"items":[{"product_id":%q,"quantity":2},{"product_id":%q,"quantity":1}]}`, b.products[0], b.products[1])
	deps := handlers.Deps{
		DB: db, Provider: &payments.Simulated{DB: db}, TTL: 24 * time.Hour, Lease: 30 * time.Second, Wait: 5 * time.Second,
		BcryptCost: bcrypt.MinCost, Logger: slog.New(slog.DiscardHandler),
	}
	if b.once, err = start(handlers.NewServer(deps)); err != nil {
		return nil, err
	}
	if b.tx, err = start(handlers.NewBaselineServer(deps)); err != nil {
		return nil, err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return errors.Join(b.once.stop(sctx), b.tx.stop(sctx))
	}
	defer stop()
	for _, name := range []string{phaseWarmup, phaseFresh, phasePlain, phaseBareSQL, phaseStorm, phasePay} {
		if err := b.signUp(ctx, name); err != nil {
			return nil, err
		}
	}

	rep := &report{database: "SQLite", workers: cfg.Workers, stormK: cfg.StormK, phases: map[string]phase{}}
	if b.postgres {
		rep.database = "PostgreSQL"
	}
	type freshKey struct{ token, key string }
	var freshKeys []freshKey              // for the replays
	paid := make([][]string, cfg.Workers) // orders to pay, per worker
	var keysMu sync.Mutex
	fresh := func(name string) func(w, i int) (int, error) {
		return func(w, i int) (int, error) {
			k := uuid.NewString()
			resp, err := b.post(ctx, b.once.url+"/api/v1/orders", b.users[name][w].token, k, b.orderBody)
			if err == nil && resp.status != http.StatusCreated {
				err = fmt.Errorf("order: %d %s", resp.status, resp.body)
			}
			if err == nil && name == phaseFresh {
				keysMu.Lock()
				freshKeys = append(freshKeys, freshKey{b.users[name][w].token, k})
				keysMu.Unlock()
			}
			return 1, err
		}
	}
	steps := []struct {
		name string
		work func(w, i int) (int, error)
	}{
		{phaseWarmup, fresh(phaseWarmup)},
		{phaseFresh, fresh(phaseFresh)},
		{phasePlain, func(w, i int) (int, error) {
			resp, err := b.post(ctx, b.tx.url+"/api/v1/orders", b.users[phasePlain][w].token, "", b.orderBody)
			if err == nil && resp.status != http.StatusCreated {
				err = fmt.Errorf("order without middleware: %d %s", resp.status, resp.body)
			}
			return 1, err
		}},
		{phaseBareSQL, func(w, i int) (int, error) { return 1, b.bareFresh(ctx, b.users[phaseBareSQL][w].id) }},
		{phaseReplay, func(w, i int) (int, error) {
			if len(freshKeys) == 0 {
				return 1, errors.New("no fresh key to replay")
			}
			k := freshKeys[i%len(freshKeys)]
			resp, err := b.post(ctx, b.once.url+"/api/v1/orders", k.token, k.key, b.orderBody)
			if err == nil && (resp.status != http.StatusCreated || !resp.replayed) {
				err = fmt.Errorf("replay: %d replayed=%v %s", resp.status, resp.replayed, resp.body)
			}
			return 1, err
		}},
		{phaseStorm, func(w, i int) (int, error) {
			var order string
			err := b.storm(ctx, b.once.url+"/api/v1/orders", b.users[phaseStorm][w].token, b.orderBody, &order)
			if err == nil {
				keysMu.Lock()
				paid[w] = append(paid[w], order)
				keysMu.Unlock()
			}
			return cfg.StormK, err
		}},
		{phasePay, func(w, i int) (int, error) {
			keysMu.Lock()
			orders := paid[w]
			if len(orders) > 0 {
				paid[w] = orders[1:]
			}
			keysMu.Unlock()
			if len(orders) == 0 {
				return 0, errNothingLeft
			}
			var payment string
			return cfg.StormK, b.storm(ctx, b.once.url+"/api/v1/orders/"+orders[0]+"/payments", b.users[phaseStorm][w].token, `{"payment_method":"pm_card_visa"}`, &payment)
		}},
	}
	rounds := max(1, cfg.Rounds)
	rep.phases[phaseWarmup] = b.phase(steps[0].name, steps[0].work, cfg.Phase, cfg.Ops)
	for r := range rounds {
		for _, s := range steps[1:4] {
			if r == 0 && s.name == phaseFresh && cfg.CPUProfile != "" {
				f, err := os.Create(cfg.CPUProfile)
				if err != nil {
					return nil, err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return nil, err
				}
				rep.phases[s.name] = rep.phases[s.name].merge(b.phase(s.name, s.work, cfg.Phase/time.Duration(rounds), cfg.Ops/rounds))
				pprof.StopCPUProfile()
				if err := f.Close(); err != nil {
					return nil, err
				}
				continue
			}
			rep.phases[s.name] = rep.phases[s.name].merge(b.phase(s.name, s.work, cfg.Phase/time.Duration(rounds), cfg.Ops/rounds))
		}
	}
	for _, s := range steps[4:] {
		rep.phases[s.name] = b.phase(s.name, s.work, cfg.Phase, cfg.Ops)
	}
	if err := stop(); err != nil {
		return nil, err
	}
	rep.audit, err = b.audit(ctx, rep)
	return rep, err
}

// errNothingLeft ends a worker's phase early: it has no more work.
var errNothingLeft = errors.New("nothing left")

// phase runs work from every worker until the phase's time or operations
// are used up, then waits for what is in flight.
func (b *bench) phase(name string, work func(w, i int) (int, error), d time.Duration, maxOps int) phase {
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
				requests, err := work(w, i)
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
	body     []byte
}

func (b *bench) post(ctx context.Context, url, token, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", data}, err
}

// storm sends one operation k times at once, behind a barrier, and checks
// that exactly one answer is original, every other one a replay of it. It
// reports the id of what was created.
func (b *bench) storm(ctx context.Context, url, token, body string, id *string) error {
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
		return err
	}
	originals := 0
	for _, a := range answers {
		if a.status != http.StatusCreated || !bytes.Equal(a.body, answers[0].body) {
			return fmt.Errorf("storm: %d %s, first %d %s", a.status, a.body, answers[0].status, answers[0].body)
		}
		if !a.replayed {
			originals++
		}
	}
	if originals != 1 {
		return fmt.Errorf("storm: %d original answers, want 1", originals)
	}
	var created struct{ ID string }
	if err := json.Unmarshal(answers[0].body, &created); err != nil || created.ID == "" {
		return fmt.Errorf("storm: no id in %s", answers[0].body)
	}
	*id = created.ID
	return nil
}

func (b *bench) signUp(ctx context.Context, name string) error {
	accounts := models.Accounts{DB: b.db, BcryptCost: bcrypt.MinCost}
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

// bareFresh is the SQL the fresh path issues for an order, and nothing else:
// the claim (one statement), then one transaction with the business insert
// (the order and its lines) and the completion update.
func (b *bench) bareFresh(ctx context.Context, userID string) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	key, owner, orderID := uuid.NewString(), uuid.NewString(), uuid.NewString()
	ref := "bare_" + strings.ReplaceAll(key, "-", "")
	if _, err := b.sqlDB.ExecContext(ctx, b.rebind(`INSERT INTO idempotency_keys
  (scope, "key", operation_id, method, route, fingerprint, state, owner_token, locked_until, status, replays, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)
ON CONFLICT (scope, "key") DO UPDATE SET
  operation_id = excluded.operation_id, method = excluded.method, route = excluded.route,
  fingerprint = excluded.fingerprint, state = excluded.state, owner_token = excluded.owner_token,
  locked_until = excluded.locked_until, status = 0, headers = NULL, body = NULL, replays = 0,
  created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE idempotency_keys.expires_at <= excluded.created_at
  AND (idempotency_keys.state = ? OR idempotency_keys.locked_until <= excluded.created_at)`),
		userID, key, uuid.NewString(), "POST", "/api/v1/orders", strings.Repeat("f", 64), "in_progress", owner,
		now.Add(30*time.Second), now, now.Add(24*time.Hour), "completed"); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	tx, err := b.sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, b.rebind(`INSERT INTO orders (id, user_id, status, currency, total_cents, idempotency_ref, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		orderID, userID, "pending", "USD", 5000, ref, now); err != nil {
		return fmt.Errorf("order: %w", err)
	}
	if _, err := tx.ExecContext(ctx, b.rebind(`INSERT INTO order_items (order_id, product_id, sku, name, unit_price_cents, quantity) VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?)`),
		orderID, b.products[0], "SKU-A", "Product A", 1900, 2, orderID, b.products[1], "SKU-B", "Product B", 1200, 1); err != nil {
		return fmt.Errorf("order items: %w", err)
	}
	body := bytes.Repeat([]byte("x"), 420) // about the size of an order's JSON
	res, err := tx.ExecContext(ctx, b.rebind(`UPDATE idempotency_keys SET state = ?, status = ?, headers = ?, body = ?
WHERE scope = ? AND "key" = ? AND owner_token = ? AND state = ?`),
		"completed", 201, `{"Content-Type":["application/json; charset=utf-8"],"Location":["/api/v1/orders/`+orderID+`"]}`, body,
		userID, key, owner, "in_progress")
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errors.New("complete: the key was not in progress")
	}
	return tx.Commit()
}

// rebind turns ? placeholders into PostgreSQL's $n.
func (b *bench) rebind(query string) string {
	if !b.postgres {
		return query
	}
	var sb strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			sb.WriteString("$" + strconv.Itoa(n))
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
