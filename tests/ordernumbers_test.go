package tests

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/shop/shop/internal/testkit"
)

// Two instances on one database take orders at the same moment: every
// order gets its own number, and the numbers are the run 1001, 1002, … with
// none taken twice and none skipped (nothing was rolled back). Each answer
// carries the number the database kept.
func TestOrderNumbersAreSequentialAcrossInstances(t *testing.T) {
	databaseURL := testkit.URL(t)
	a, b := startShop(t, "instance A", "DATABASE_URL="+databaseURL), startShop(t, "instance B", "DATABASE_URL="+databaseURL)
	e := &env{t: t, db: testkit.Open(t, databaseURL), url: a.url}
	token := e.signUp("numbers@example.com")
	product := e.products()[0]
	const n = 16
	start := make(chan struct{})
	answers := make([]response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			base := []string{a.url, b.url}[i%2]
			r := request{method: "POST", path: "/api/v1/orders", token: token, key: key(fmt.Sprint("numbered-", i)), body: orderBody(product, 1)}
			answers[i], errs[i] = sendTo(base, r)
		})
	}
	close(start)
	wg.Wait()
	var numbers []int64
	for i, r := range answers {
		if errs[i] != nil || r.Status != http.StatusCreated {
			t.Fatalf("order %d: %v %d %s", i, errs[i], r.Status, r.Body)
		}
		body := r.json(t)
		number, _ := body["number"].(float64)
		var kept int64
		e.db.Table("orders").Where("id = ?", body["id"]).Pluck("number", &kept)
		if int64(number) != kept {
			t.Fatalf("order %s answered number %v, the database kept %d", body["id"], body["number"], kept)
		}
		numbers = append(numbers, kept)
	}
	slices.Sort(numbers)
	for i, got := range numbers {
		if got != int64(1001+i) {
			t.Fatalf("numbers %v, want 1001 to %d, each once", numbers, 1000+n)
		}
	}
	if got := e.count("orders"); got != n {
		t.Fatalf("%d orders, want %d", got, n)
	}
}
