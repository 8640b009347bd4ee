package tests

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/outbox"
)

// Group commit is SQLite's (models/groupcommit.go): these tests run the
// shop on an SQLite file of their own, whichever database the suite is on.

// sqliteShop starts the shop on a new SQLite file with the settings given.
func sqliteShop(t *testing.T, name, path string, settings ...string) (*shopProcess, *env) {
	t.Helper()
	shop := startShop(t, name, append([]string{"DATABASE_URL=" + path}, settings...)...)
	return shop, &env{t: t, db: testkit.Open(t, path), url: shop.url}
}

// commitCounts reads SQLite's COMMITs and the transactions in them off
// the shop's /metrics.
func commitCounts(e *env) (commits, operations float64) {
	m := e.metrics()
	return gauge(m, "shop_sqlite_commits_total"), gauge(m, "shop_sqlite_committed_operations_total")
}

// orderFlood has clients place fresh orders at once, each with a key of
// its own, until each has tried max or the server is gone; it returns the keys answered 201 with their order ids, and how
// many got another answer or none.
func orderFlood(ctx context.Context, e *env, token, product string, clients, max int) (map[string]string, int64) {
	var (
		mu         sync.Mutex
		placed     = map[string]string{}
		unanswered atomic.Int64
		wg         sync.WaitGroup
	)
	for c := range clients {
		wg.Go(func() {
			for i := 0; i < max && ctx.Err() == nil; i++ {
				k := fmt.Sprintf("flood-%d-%d", c, i)
				r, err := e.send(request{method: "POST", path: "/api/v1/orders", token: token, key: key(k), body: orderBody(product, 1)})
				if err != nil || r.Status != http.StatusCreated {
					unanswered.Add(1)
					if err != nil {
						return // the server is gone
					}
					continue
				}
				if id, err := r.field("id"); err == nil {
					mu.Lock()
					placed[k] = id
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return placed, unanswered.Load()
}

// Under load, orders share commits: 32 clients at once make fewer SQLite
// COMMITs than orders, and every order is answered 201 and kept whole.
// With SQLITE_GROUP_COMMIT=1 the same load takes a COMMIT per transaction:
// the counts are the writer's own, not a figure that is always low.
func TestGroupCommitSharesCommitsBetweenOrders(t *testing.T) {
	const clients, each = 32, 8
	for _, tc := range []struct {
		setting string
		shared  bool
	}{{"SQLITE_GROUP_COMMIT=32", true}, {"SQLITE_GROUP_COMMIT=1", false}} {
		t.Run(tc.setting, func(t *testing.T) {
			_, e := sqliteShop(t, "shop", filepath.Join(t.TempDir(), "shop.db"), tc.setting, "ORDER_EXPIRY=24h")
			token, product := e.signUp("many@example.com"), e.products()[0]
			commits0, ops0 := commitCounts(e)
			placed, unanswered := orderFlood(t.Context(), e, token, product, clients, each)
			commits, ops := commitCounts(e)
			commits, ops = commits-commits0, ops-ops0
			if len(placed) != clients*each || unanswered != 0 {
				t.Fatalf("%d orders placed, %d unanswered; want %d placed", len(placed), unanswered, clients*each)
			}
			orders := float64(len(placed))
			t.Logf("%s: %.0f orders, %.0f transactions in %.0f commits: %.2f commits per order", tc.setting, orders, ops, commits, commits/orders)
			switch {
			case ops < orders:
				t.Fatalf("%.0f transactions committed for %.0f orders: each order is one at least", ops, orders)
			case tc.shared && commits >= orders:
				t.Fatalf("%.0f commits for %.0f orders: none shared", commits, orders)
			case !tc.shared && commits != ops:
				t.Fatalf("%.0f commits for %.0f transactions with group commit off, want one each", commits, ops)
			}
			wantOrdersWhole(t, e, placed)
		})
	}
}

// A crash in the middle of a batch: a real server, built with -tags
// groupcrash, kills itself (SIGKILL) just before its 20th shared COMMIT of
// two or more orders, while 32 clients place orders at once; then a
// restart on the same file. Every order answered 201 is there, whole: its
// lines, its completed key, its event. No order nobody was answered
// half-exists: every order row has its lines, its key and its event, and
// no key is left without its order. Stock is intact.
func TestKill9DuringAGroupCommitKeepsEveryAnsweredOrderWhole(t *testing.T) {
	binary, err := testkit.Build(t.TempDir(), raceEnabled, "groupcrash")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shop.db")
	settings := []string{"DATABASE_URL=" + path, "IDEMPOTENCY_LEASE=1s", "ORDER_EXPIRY=24h"}
	first, err := testkit.Start(binary, t.TempDir(), append(settings, "GROUP_COMMIT_CRASH_AT=20")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Kill)
	e := &env{t: t, db: testkit.Open(t, path), url: first.URL}
	token, product := e.signUp("kill9-batch@example.com"), e.products()[0]
	had := map[string]int{product: unitsLeft(t, e.db, product)}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	placed, unanswered := orderFlood(ctx, e, token, product, 32, 40)
	first.Kill() // it is gone already: this waits for its exit
	if unanswered == 0 {
		t.Fatalf("all %d orders were answered: the server did not crash mid-batch", len(placed))
	}
	t.Logf("%d orders answered 201 before the crash, %d requests unanswered", len(placed), unanswered)
	second := startShop(t, "restarted server", settings...)
	e.url = second.url
	wantOrdersWhole(t, e, placed)
	wantStockIdentity(t, e.db, had)
	if keys, orders := e.count("idempotency_keys"), e.count("orders"); keys != orders {
		t.Fatalf("%d keys for %d orders: a key was kept without its order", keys, orders)
	}
}

// wantOrdersWhole checks that every placed order (key → id) is there, and
// that every order in the database is whole: two lines are not asked of
// it, but at least one, a completed key answered 201 and its
// order.placed event.
func wantOrdersWhole(t *testing.T, e *env, placed map[string]string) {
	t.Helper()
	for k, id := range placed {
		if e.count("orders", "id = ?", id) != 1 {
			t.Fatalf("order %s, answered 201 for key %s, is gone", id, k)
		}
		if e.count("idempotency_keys", "key = ? AND state = ? AND status = ?", k, "completed", http.StatusCreated) != 1 {
			t.Fatalf("key %s, answered 201, is not completed with it", k)
		}
	}
	var halves []string
	err := e.db.Raw(`SELECT o.id FROM orders o
		WHERE NOT EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id)
		   OR NOT EXISTS (SELECT 1 FROM events v WHERE v.order_id = o.id AND v.type = ?)
		   OR NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.state = 'completed' AND k.body LIKE '%' || o.id || '%')`,
		outbox.OrderPlaced).Scan(&halves).Error
	if err != nil {
		t.Fatal(err)
	}
	if len(halves) > 0 {
		t.Fatalf("%d orders half-exist (no lines, event or completed key): %v", len(halves), halves)
	}
}
