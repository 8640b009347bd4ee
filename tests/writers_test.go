package tests

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/shop/shop/internal/testkit"
)

// Sixty-four clients each place orders of their own at once, against the
// shop at its default settings and with IDEMPOTENCY_WAIT at its least: no
// key is held by anyone else, so not one order may be answered 409 (or
// anything but 201) for waiting on the database. On SQLite writers queue
// for the one write connection in process; they used to sleep in SQLite's
// busy handler, and a short wait answered 409 to some. Every answer and
// every row is counted; nothing is timed.
func TestConcurrentDistinctOrdersNeverConflict(t *testing.T) {
	for _, settings := range [][]string{nil, {"IDEMPOTENCY_WAIT=1ms"}} {
		t.Run(fmt.Sprint(settings), func(t *testing.T) {
			databaseURL := testkit.URL(t)
			shop := startShop(t, "shop", append([]string{"DATABASE_URL=" + databaseURL}, settings...)...)
			e := &env{t: t, db: testkit.Open(t, databaseURL), url: shop.url}
			token := e.signUp("many@example.com")
			p := e.products()
			const clients, each = 64, 20
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				statuses = map[int]int{}
				failures []string
			)
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						r, err := e.send(request{
							method: "POST", path: "/api/v1/orders", token: token,
							key: key(fmt.Sprintf("writer-%d-%d", c, i)), body: orderBody(p[i%len(p)], 1),
						})
						mu.Lock()
						statuses[r.Status]++
						if (err != nil || r.Status != http.StatusCreated) && len(failures) < 5 {
							failures = append(failures, fmt.Sprintf("%d %v %s", r.Status, err, r.Body))
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if statuses[http.StatusCreated] != clients*each {
				t.Fatalf("answers by status %v, want %d × 201; first failures: %v", statuses, clients*each, failures)
			}
			got := e.sideEffects()
			if got.orders != clients*each || got.storedKeys != clients*each || got.keyRows != clients*each {
				t.Fatalf("%+v; want %d orders, each with its completed key", got, clients*each)
			}
		})
	}
}
