package tests

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// page is one page of a listing, as a client reads it.
type page struct {
	ids  []string
	next string // next_cursor; empty when null
	link string // the URL in the Link rel="next" header; empty when absent
}

var nextLink = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

func (e *env) page(token, path, list, id string) page {
	e.t.Helper()
	r := e.do(request{method: "GET", path: path, token: token})
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	body := r.json(e.t)
	var p page
	for _, item := range body[list].([]any) {
		p.ids = append(p.ids, fmt.Sprint(item.(map[string]any)[id]))
	}
	if next, ok := body["next_cursor"].(string); ok {
		p.next = next
	} else if body["next_cursor"] != nil {
		e.t.Fatalf("next_cursor %v", body["next_cursor"])
	}
	if link := r.Header.Get("Link"); link != "" {
		m := nextLink.FindStringSubmatch(link)
		if m == nil {
			e.t.Fatalf("Link %q", link)
		}
		p.link = m[1]
	}
	if (p.next == "") != (p.link == "") || p.link != "" && !strings.Contains(p.link, "after="+p.next) {
		e.t.Fatalf("next_cursor %q and Link %q disagree", p.next, p.link)
	}
	return p
}

// userOrders are the user's order ids, newest first, from the database.
func (e *env) userOrders(email string) []string {
	e.t.Helper()
	var ids []string
	err := e.db.Model(&models.Order{}).Joins("JOIN users ON users.id = orders.user_id").Where("users.email = ?", email).
		Order("orders.created_at DESC, orders.id DESC").Pluck("orders.id", &ids).Error
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// Orders come 20 to a page by default, newest first; following next_cursor
// (or the Link) lists every order of the user once, and nobody else's.
// Orders placed while a client pages do not shift the pages after its
// cursor.
func TestOrdersArePaginated(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.signUp("alice@example.com"), e.signUp("bob@example.com")
	p := e.products()
	for i := range 25 {
		e.createOrder(alice, fmt.Sprint("a-", i), orderBody(p[i%2], i%3+1))
	}
	e.createOrder(bob, "b-0", orderBody(p[0], 1))
	want := e.userOrders("alice@example.com")
	if len(want) != 25 {
		t.Fatalf("alice has %d orders in the database, want 25", len(want))
	}

	first := e.page(alice, "/api/v1/orders", "orders", "id")
	if !slices.Equal(first.ids, want[:20]) || first.next == "" {
		t.Fatalf("first page %v next %q, want the 20 newest %v", first.ids, first.next, want[:20])
	}
	second := e.page(alice, first.link, "orders", "id")
	if !slices.Equal(second.ids, want[20:]) || second.next != "" || second.link != "" {
		t.Fatalf("second page %v next %q link %q, want the 5 oldest %v and no next", second.ids, second.next, second.link, want[20:])
	}

	// Page by 10; between the pages, alice places three more orders.
	one := e.page(alice, "/api/v1/orders?limit=10", "orders", "id")
	for i := range 3 {
		e.createOrder(alice, fmt.Sprint("late-", i), orderBody(p[0], 1))
	}
	two := e.page(alice, "/api/v1/orders?limit=10&after="+one.next, "orders", "id")
	three := e.page(alice, two.link, "orders", "id")
	if !slices.Equal(one.ids, want[:10]) || !slices.Equal(two.ids, want[10:20]) || !slices.Equal(three.ids, want[20:]) || three.next != "" {
		t.Fatalf("pages by 10 across inserts: %v %v %v, want %v", one.ids, two.ids, three.ids, want)
	}
	if got := e.page(alice, "/api/v1/orders?limit=100", "orders", "id"); len(got.ids) != 28 || got.next != "" {
		t.Fatalf("limit=100: %d orders, next %q; want 28 and none", len(got.ids), got.next)
	}
	if got := e.page(bob, "/api/v1/orders", "orders", "id"); len(got.ids) != 1 || slices.Contains(want, got.ids[0]) {
		t.Fatalf("bob's listing: %v", got.ids)
	}
	// Bob cannot continue alice's listing with her cursor: he gets his own
	// orders older than that position, and none of hers.
	if got := e.page(bob, "/api/v1/orders?after="+one.next, "orders", "id"); slices.ContainsFunc(got.ids, func(id string) bool { return slices.Contains(want, id) }) {
		t.Fatalf("bob, with alice's cursor, sees %v", got.ids)
	}
}

// The keys listing pages the same way: every key of the user once.
func TestIdempotencyKeysArePaginated(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.signUp("alice@example.com"), e.signUp("bob@example.com")
	p := e.products()
	for i := range 23 {
		e.createOrder(alice, fmt.Sprint("a-", i), orderBody(p[0], 1))
	}
	e.createOrder(bob, "b-0", orderBody(p[0], 1))
	var seen []string
	path := "/api/v1/idempotency-keys?limit=10"
	pages := 0
	for path != "" {
		pg := e.page(alice, path, "idempotency_keys", "key")
		seen = append(seen, pg.ids...)
		path = pg.link
		pages++
	}
	var want []string
	if err := e.db.Table("idempotency_keys").Where(`"key" LIKE ?`, "a-%").Order("created_at DESC, id DESC").Pluck("key", &want).Error; err != nil {
		t.Fatal(err)
	}
	if pages != 3 || len(want) != 23 || !slices.Equal(seen, want) {
		t.Fatalf("%d pages listing %v, want 3 pages listing %v", pages, seen, want)
	}
	if first := e.page(alice, "/api/v1/idempotency-keys", "idempotency_keys", "key"); len(first.ids) != 20 || first.next == "" {
		t.Fatalf("default page: %d keys, next %q", len(first.ids), first.next)
	}
}

// A limit out of range and a cursor the listing did not make are 400
// problems, on both listings: cursors that do not parse, and cursors that
// parse but are out of range — a key id of 2^63 or more (once a 500 from the
// database), a time before 1970 or past int64, an id in another form.
func TestBadPageParametersAreRefused(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("ann@example.com")
	e.createOrder(token, "a", orderBody(e.products()[0], 1))
	var outOfRange []string
	for _, raw := range []string{"1.18446744073709551615", "1.9223372036854775808", "1.0", "1.-3", "1.+3", "1.007",
		"99999999999999999999.1", "-5.1", "0.1", "+1.1", "1.00000000-0000-4000-8000-00000000000A",
		"1.urn:uuid:00000000-0000-4000-8000-000000000000", "1.{00000000-0000-4000-8000-000000000000}"} {
		outOfRange = append(outOfRange, "after="+base64.RawURLEncoding.EncodeToString([]byte(raw)))
	}
	for _, list := range []string{"/api/v1/orders", "/api/v1/idempotency-keys"} {
		for _, query := range append([]string{"limit=0", "limit=101", "limit=-1", "limit=ten", "limit=", "limit=1.5",
			"after=", "after=%21%21", "after=bm90LWEtY3Vyc29y", "after=MTIzLm5vdC1hbi1pZA", "after=eC4xMjM"}, outOfRange...) {
			r := e.do(request{method: "GET", path: list + "?" + query, token: token, offContract: true})
			isProblem(t, r, http.StatusBadRequest, problem.InvalidParameter.URI())
		}
	}
}

// My orders in the browser shows 20 orders a page, with a link to the
// older ones.
func TestMyOrdersPageIsPaginated(t *testing.T) {
	e := newEnv(t)
	s := e.shopper()
	s.signUp("web@example.com")
	r := e.do(request{method: "POST", path: "/api/v1/tokens", body: `{"email":"web@example.com","password":"` + webPassword + `"}`})
	token := r.json(t)["token"].(string)
	p := e.products()
	for i := range 22 {
		e.createOrder(token, fmt.Sprint("w-", i), orderBody(p[0], 1))
	}
	want := e.userOrders("web@example.com")
	first := s.get("/orders")
	older := regexp.MustCompile(`<a href="([^"]+)" rel="next">Older orders</a>`).FindStringSubmatch(string(first.Body))
	if first.Status != http.StatusOK || older == nil {
		t.Fatalf("first page: %d, no link to older orders", first.Status)
	}
	second := s.get(strings.ReplaceAll(older[1], "&amp;", "&"))
	for i, id := range want {
		onFirst, onSecond := strings.Contains(string(first.Body), "/orders/"+id), strings.Contains(string(second.Body), "/orders/"+id)
		if onFirst != (i < 20) || onSecond != (i >= 20) {
			t.Fatalf("order %d (%s): on the first page %v, on the second %v", i, id, onFirst, onSecond)
		}
	}
	if strings.Contains(string(second.Body), "Older orders") {
		t.Fatal("the last page links to older orders")
	}
	if bad := s.get("/orders?after=nonsense"); bad.Status != http.StatusBadRequest || !strings.HasPrefix(bad.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("bad cursor: %d %s", bad.Status, bad.Header.Get("Content-Type"))
	}
}
