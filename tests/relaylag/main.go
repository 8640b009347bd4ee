// Command relaylag measures whether the outbox's relay keeps up with the
// orders. It starts nats-server (JetStream, a temporary store) on a free
// port, then the shop in this process as main wires it: the relay (its
// consumers as jobs.StartRelay builds them, NATS_URL set) and the server,
// which wakes the relay at each commit. Workers place fresh orders over
// real HTTP as fast as they can for -phase; then it counts the events not
// yet published (the backlog at the end of the load), waits for the relay
// to drain them, and reads the stream back: for each event, the lag from
// its commit (events.created_at, written in the order's transaction) to
// the stream's ack (the message's stored timestamp). It checks that the
// stream holds each event once (distinct Nats-Msg-Id, one per event).
//
//	go run ./tests/relaylag                                   # SQLite in a temporary directory
//	go run ./tests/relaylag -db 'postgres://…/db?sslmode=disable' -label PostgreSQL
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers"
	"github.com/shop/shop/jobs"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/outbox"
	"github.com/shop/shop/outbox/publish"
	"github.com/shop/shop/payments"
)

type settings struct {
	db, label, natsServer, markdown string
	phase                           time.Duration
	workers                         int
}

func main() {
	var s settings
	flag.StringVar(&s.db, "db", "", "a postgres:// URL (its tables are created and left behind) or an SQLite path; empty: SQLite in a temporary directory")
	flag.StringVar(&s.label, "label", "SQLite", "the database's name in the results")
	flag.StringVar(&s.natsServer, "nats-server", "/usr/sbin/nats-server", "the nats-server binary")
	flag.StringVar(&s.markdown, "markdown", "", "also write the results as one Markdown table row to this file")
	flag.DurationVar(&s.phase, "phase", 10*time.Second, "how long the workers place orders")
	flag.IntVar(&s.workers, "workers", 16, "concurrent clients")
	flag.Parse()
	if err := run(context.Background(), s, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "relaylag:", err)
		os.Exit(1)
	}
}

// result is what one run measured.
type result struct {
	orders, events, backlog, stored int
	phase, drain                    time.Duration
	p50, p99, max                   time.Duration
}

func run(ctx context.Context, s settings, out io.Writer) error {
	dir, err := os.MkdirTemp("", "shop-relaylag-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if s.db == "" {
		s.db = filepath.Join(dir, "shop.db")
	}
	natsURL, stopNATS, err := startNATS(s.natsServer, dir)
	if err != nil {
		return err
	}
	defer stopNATS()
	cfg := config.Default()
	cfg.NATSURL, cfg.MailDir = natsURL, filepath.Join(dir, "mail")
	db, err := database.Open(s.db, database.Options{GroupCommit: cfg.GroupCommit})
	if err != nil {
		return err
	}
	defer database.Close(db)
	if err := prepare(db); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stopRelay, relay, err := jobs.StartRelay(ctx, cfg, db, logger)
	if err != nil {
		return err
	}
	defer stopRelay()
	srv := handlers.NewServer(handlers.Deps{DB: db, Payments: billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db},
		Lease: cfg.IdempotencyLease, AttemptTimeout: cfg.AttemptTimeout(), RollForward: cfg.RollForward, AuthExpiry: cfg.AuthExpiry, Logger: logger}),
		TTL: cfg.IdempotencyTTL, Lease: cfg.IdempotencyLease, Wait: cfg.IdempotencyWait, OrderExpiry: cfg.OrderExpiry,
		TokenTTL: cfg.TokenTTL, SessionIdle: cfg.SessionIdle, SessionMaxAge: cfg.SessionMaxAge, MaxPendingOrders: 1000000,
		BcryptCost: bcrypt.MinCost, Logger: logger, Collectors: relay.Collectors(), Committed: relay.Wake})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, srv) }()
	defer ln.Close()
	r, err := measure(ctx, s, db, natsURL, "http://"+ln.Addr().String())
	if err != nil {
		return err
	}
	return report(s, r, out)
}

// prepare migrates and seeds the database, and gives the two products the
// orders buy stock that never runs out.
func prepare(db *gorm.DB) error {
	if err := database.Migrate(db); err != nil {
		return err
	}
	if err := orders.Seed(db); err != nil {
		return err
	}
	sub := db.Model(&models.Product{}).Order("sku").Limit(2).Select("id")
	return db.Model(&models.Product{}).Where("id IN (?)", sub).Update("stock", math.MaxInt32).Error
}

// startNATS starts a JetStream server on a free port, storing under dir.
func startNATS(binary, dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(binary, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", filepath.Join(dir, "nats"))
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", binary, err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return url, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("nats-server did not listen within 10 s")
		}
	}
}

// measure places orders for the phase, counts the backlog, waits for the
// relay to drain it, and reads the lags back from the stream.
func measure(ctx context.Context, s settings, db *gorm.DB, natsURL, base string) (result, error) {
	var r result
	product, err := firstProduct(db)
	if err != nil {
		return r, err
	}
	tokens := make([]string, s.workers)
	for i := range tokens {
		if tokens[i], err = signUp(base, fmt.Sprintf("relaylag-%d-%s@example.com", i, uuid.NewString()[:8])); err != nil {
			return r, err
		}
	}
	body := fmt.Sprintf(`{"items":[{"product_id":%q,"quantity":1}]}`, product)
	var placed, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(s.phase)
	for _, token := range tokens {
		wg.Go(func() {
			for time.Now().Before(end) {
				if post(base+"/api/v1/orders", token, uuid.NewString(), body) == http.StatusCreated {
					placed.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r.phase, r.orders = time.Since(start), int(placed.Load())
	if n := failed.Load(); n > 0 {
		return r, fmt.Errorf("%d orders were not placed", n)
	}
	var made, waiting int64
	if err := db.Model(&outbox.Event{}).Count(&made).Error; err != nil {
		return r, err
	}
	if waiting, err = unpublished(db); err != nil {
		return r, err
	}
	r.events, r.backlog = int(made), int(waiting)
	drained := time.Now()
	for waiting > 0 {
		if time.Since(drained) > 2*time.Minute {
			return r, fmt.Errorf("%d events still unpublished 2 minutes after the load", waiting)
		}
		time.Sleep(20 * time.Millisecond)
		if waiting, err = unpublished(db); err != nil {
			return r, err
		}
	}
	r.drain = time.Since(drained)
	return r, lags(ctx, db, natsURL, &r)
}

// unpublished counts the events the JetStream consumer has not handled.
func unpublished(db *gorm.DB) (int64, error) {
	var n int64
	err := db.Model(&outbox.Event{}).Where("NOT EXISTS (SELECT 1 FROM inbox i WHERE i.consumer = ? AND i.event_id = events.id)", publish.JetStreamConsumer).Count(&n).Error
	return n, err
}

// lags reads every message of the stream back and measures, for each
// event, its commit to the stream's ack; it refuses a stream that does not
// hold each event exactly once.
func lags(ctx context.Context, db *gorm.DB, natsURL string, r *result) error {
	var events []outbox.Event
	if err := db.Select("id", "created_at").Find(&events).Error; err != nil {
		return err
	}
	committed := make(map[string]time.Time, len(events))
	for _, ev := range events {
		committed[ev.ID] = ev.CreatedAt
	}
	acked, err := readStream(ctx, natsURL, len(events))
	if err != nil {
		return err
	}
	if len(acked) != len(committed) {
		return fmt.Errorf("%d distinct Nats-Msg-Id in the stream for %d events", len(acked), len(committed))
	}
	all := make([]time.Duration, 0, len(acked))
	for id, at := range acked {
		c, ok := committed[id]
		if !ok {
			return fmt.Errorf("the stream holds %s, which is no event", id)
		}
		all = append(all, at.Sub(c))
	}
	slices.Sort(all)
	r.stored = len(all)
	r.p50, r.p99, r.max = all[len(all)/2], all[min(len(all)-1, len(all)*99/100)], all[len(all)-1]
	return nil
}

// readStream reads n messages from the shop's stream: each one's
// Nats-Msg-Id and the time the stream stored it. A repeated id is an error.
func readStream(ctx context.Context, natsURL string, n int) (map[string]time.Time, error) {
	conn, err := nats.Connect(natsURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		return nil, err
	}
	consumer, err := js.OrderedConsumer(ctx, config.Default().NATSStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	acked := make(map[string]time.Time, n)
	for len(acked) < n {
		batch, err := consumer.Fetch(min(n-len(acked), 1000), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			meta, err := msg.Metadata()
			if err != nil {
				return nil, err
			}
			id := msg.Headers().Get(jetstream.MsgIDHeader)
			if _, twice := acked[id]; twice {
				return nil, fmt.Errorf("Nats-Msg-Id %s twice in the stream", id)
			}
			acked[id] = meta.Timestamp
		}
		if got == 0 {
			return nil, fmt.Errorf("the stream holds %d messages; want %d", len(acked), n)
		}
	}
	return acked, nil
}

func firstProduct(db *gorm.DB) (string, error) {
	var p models.Product
	err := db.Order("sku").Take(&p).Error
	return p.ID, err
}

// signUp makes a shopper and answers their bearer token.
func signUp(base, email string) (string, error) {
	creds := fmt.Sprintf(`{"email":%q,"password":"correct horse"}`, email)
	if status := post(base+"/api/v1/users", "", "", creds); status != http.StatusCreated {
		return "", fmt.Errorf("sign up: %d", status)
	}
	resp, err := http.Post(base+"/api/v1/tokens", "application/json", strings.NewReader(creds))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	_, rest, ok := strings.Cut(string(raw), `"token":"`)
	token, _, ok2 := strings.Cut(rest, `"`)
	if resp.StatusCode != http.StatusCreated || !ok || !ok2 {
		return "", fmt.Errorf("token: %d %s", resp.StatusCode, raw)
	}
	return token, nil
}

// post sends body and answers the status, 0 when nothing answered.
func post(url, token, key, body string) int {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func report(s settings, r result, out io.Writer) error {
	share := 100 * float64(r.backlog) / float64(max(r.events, 1))
	rate := float64(r.events-r.backlog) / r.phase.Seconds()
	verdict := "meets"
	if r.p99 > time.Second || share > 1 {
		verdict = "MISSES"
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
	fmt.Fprintf(out, "%s: %d orders in %s, %d events; relay %.0f events/s during the load; lag commit→ack p50 %s ms, p99 %s ms, max %s ms; backlog at the end %d (%.2f%%), drained in %s; %d distinct Nats-Msg-Id; %s\n",
		s.label, r.orders, r.phase.Round(time.Millisecond), r.events, rate, ms(r.p50), ms(r.p99), ms(r.max), r.backlog, share, r.drain.Round(time.Millisecond), r.stored, verdict)
	if s.markdown == "" {
		return nil
	}
	row := fmt.Sprintf("| %s | %d | %.1f | %.0f | %s | %s | %s | %d (%.2f %%) | %s |\n",
		s.label, r.events, r.phase.Seconds(), rate, ms(r.p50), ms(r.p99), ms(r.max), r.backlog, share, verdict)
	return os.WriteFile(s.markdown, []byte(row), 0o644)
}
