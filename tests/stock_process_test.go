package tests

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
)

// kill -9 of a real server while shoppers buy the last units of one
// product (and plenty of another), a third of them cancelling their order,
// then a restart on the same database; clients retry with their keys
// until they get a final answer. Afterwards, for every product, the units
// it had are the units it has plus those its live orders hold: the kill
// lost none and made none. Each order placed is one order; each
// out-of-stock answer wrote nothing, no key either.
func TestKill9MidOrdersKeepsTheStockIdentity(t *testing.T) {
	databaseURL := testkit.URL(t)
	settings := []string{"DATABASE_URL=" + databaseURL, "IDEMPOTENCY_LEASE=1s", "IDEMPOTENCY_WAIT=300ms"}
	first := startShop(t, "first server", settings...)
	var base atomic.Value
	base.Store(first.url)
	server := func() string { return base.Load().(string) }
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: first.url}
	const units, n, workers = 40, 48, 8
	tote, plenty := stockOf(t, e.db, "TOTE-CNV", units), e.products()[0]
	had := map[string]int{tote: units, plenty: unitsLeft(t, e.db, plenty)}
	token := e.signUp("kill9-stock@example.com")

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var done, placed, short, cancelled atomic.Int64
	killNow := make(chan struct{})
	queue := make(chan int, n)
	for i := range n {
		queue <- i
	}
	close(queue)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range queue {
				if err := shopOnce(ctx, server, token, i, tote, plenty, &placed, &short, &cancelled); err != nil {
					t.Error(err)
				}
				if done.Add(1) == n/3 {
					close(killNow)
				}
			}
		})
	}
	<-killNow
	first.kill()
	second := startShop(t, "restarted server", settings...)
	base.Store(second.url)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d placed (%d cancelled), %d out of stock", placed.Load(), cancelled.Load(), short.Load())
	if placed.Load()+short.Load() != n || short.Load() == 0 || cancelled.Load() == 0 {
		t.Fatalf("%d placed and %d out of stock of %d orders, %d cancelled; want some of each", placed.Load(), short.Load(), n, cancelled.Load())
	}
	if orders, keys := e.count("orders"), e.count("idempotency_keys"); orders != placed.Load() || keys != placed.Load()+cancelled.Load() {
		t.Fatalf("%d orders and %d keys, want %d and %d: an out-of-stock order keeps nothing", orders, keys, placed.Load(), placed.Load()+cancelled.Load())
	}
	wantStockIdentity(t, e.db, had)
}

// shopOnce places order i (retrying until a final answer), and cancels
// every third one placed, counting what became of it.
func shopOnce(ctx context.Context, server func() string, token string, i int, tote, plenty string, placed, short, cancelled *atomic.Int64) error {
	order := request{method: "POST", path: "/api/v1/orders", token: token, key: key(fmt.Sprintf("order-%d", i)), body: orderBody(tote, 1+i%2, plenty, 1)}
	r, err := untilFinal(ctx, server, order)
	switch {
	case err != nil:
		return err
	case r.Status == http.StatusConflict:
		if typ, err := r.field("type"); err != nil || typ != "/problems/out-of-stock" {
			return fmt.Errorf("order %d: %d %s", i, r.Status, r.Body)
		}
		short.Add(1)
		return nil
	case r.Status != http.StatusCreated:
		return fmt.Errorf("order %d: %d %s", i, r.Status, r.Body)
	}
	placed.Add(1)
	if i%3 != 0 {
		return nil
	}
	orderID, err := r.field("id")
	if err != nil {
		return err
	}
	c := request{method: "POST", path: "/api/v1/orders/" + orderID + "/cancel", token: token, key: key(fmt.Sprintf("cancel-%d", i)), body: `{}`}
	if r, err = untilFinal(ctx, server, c); err != nil || r.Status != http.StatusOK {
		return fmt.Errorf("cancel %d: %d %s (%v)", i, r.Status, r.Body, err)
	}
	cancelled.Add(1)
	return nil
}
