package tests

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/config"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// lookups counts the simulated provider's lookups of a charge, the calls a
// read of a waiting order may make; its page and ledger are the
// simulation's own.
type lookups struct {
	*payments.Simulated
	n atomic.Int64
}

func (l *lookups) Find(ctx context.Context, req payments.ChargeRequest) (payments.Charge, bool, error) {
	l.n.Add(1)
	return l.Simulated.Find(ctx, req)
}

// countWrites counts every statement that writes through db and the
// sessions made from it: inserts, updates, deletes and raw statements.
func countWrites(t *testing.T, db *gorm.DB) *atomic.Int64 {
	t.Helper()
	n := &atomic.Int64{}
	count := func(*gorm.DB) { n.Add(1) }
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().After("gorm:create").Register("tests:writes", count),
		cb.Update().After("gorm:update").Register("tests:writes", count),
		cb.Delete().After("gorm:delete").Register("tests:writes", count),
		cb.Raw().After("gorm:raw").Register("tests:writes", count),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// readAll sends n GETs of path at once, spread over the instances at
// bases, and wants each answered 200.
func readAll(t *testing.T, bases []string, path, token string, n int) {
	t.Helper()
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			req, err := http.NewRequest("GET", bases[i%len(bases)]+path, nil)
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			r, err := client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			r.Body.Close()
			if r.StatusCode != http.StatusOK {
				errs[i] = errors.New(r.Status)
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// Reads of an order whose payment waits for the shopper to authenticate,
// 50 at once over two instances, ask the provider once (the first read's
// turn, taken by one conditional update) and write nothing else; once
// PAYMENT_AUTH_POLL has passed, 50 more ask once more. The shopper's return
// from the authentication page then settles the attempt at once, inside
// the poll: the order is paid, once.
func TestReadsOfAWaitingOrderAskTheProviderOnceAPoll(t *testing.T) {
	var provider *lookups
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider {
		provider = &lookups{Simulated: p.(*payments.Simulated)}
		return provider
	}))
	other := httptest.NewServer(newServer(t, e.deps))
	t.Cleanup(other.Close)
	bases := []string{e.url, other.URL}
	token := e.signUp("reload@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	_, page := e.payToAuthenticate(token, orderID, "k1")
	writes := countWrites(t, e.db)
	path := "/api/v1/orders/" + orderID

	readAll(t, bases, path, token, 1)
	if n := provider.n.Load(); n != 1 {
		t.Fatalf("the first read asked the provider %d times, want 1", n)
	}
	checked := writes.Load()
	readAll(t, bases, path, token, 49)
	if n, w := provider.n.Load(), writes.Load()-checked; n != 1 || w != 0 {
		t.Fatalf("49 reads within the poll: %d provider lookups in all, %d writes; want 1 and none", n, w)
	}
	e.clock.Advance(config.Default().AuthPoll)
	readAll(t, bases, path, token, 50)
	if n := provider.n.Load(); n != 2 {
		t.Fatalf("50 reads once the poll passed: %d provider lookups in all, want 2", n)
	}
	if state := e.attemptState(token, orderID); state != models.RequiresAction {
		t.Fatalf("the attempt is %q while the shopper has not answered", state)
	}
	if e.provider.Calls() != 1 || e.count("payment_attempts") != 1 {
		t.Fatalf("%d charges asked, %d attempts; want 1 each", e.provider.Calls(), e.count("payment_attempts"))
	}

	e.authenticate(page, "complete")
	e.paidOnReturn(token, orderID, "after the return, within the poll")
}

// A staff user removed (`shop staff remove`, accounts.SetRole) is refused a
// refund at once, through the same bearer token, though this instance's
// token cache (TOKEN_CACHE_TTL) still holds them as staff: 403 forbidden,
// and no refund, no provider refund, no audit entry, no event (so no
// email).
func TestRemovedStaffIsRefusedARefundAtOnce(t *testing.T) {
	e := newEnv(t)
	if config.Default().TokenCacheTTL <= 0 {
		t.Fatal("the token cache is off")
	}
	_, orderID := e.shopperOrder("shopper@example.com")
	staff, _ := e.staffToken("staff@example.com")
	deliveries := request{method: "GET", path: "/api/v1/webhook-deliveries", token: staff}
	if r := e.do(deliveries); r.Status != http.StatusOK {
		t.Fatalf("a staff read: %d %s", r.Status, r.Body)
	}
	writes := func() [5]int64 {
		return [5]int64{e.count("refunds"), e.count("simulated_refunds"), e.count("audit_entries"), e.count("events"), e.provider.Calls()}
	}
	before := writes()
	if _, err := accounts.SetRole(t.Context(), e.db, "staff@example.com", models.Shopper); err != nil {
		t.Fatal(err)
	}
	if r := e.do(deliveries); r.Status != http.StatusOK {
		t.Fatalf("the cached lookup no longer says staff (%d): the test proves nothing", r.Status)
	}
	isProblem(t, e.do(e.refundRequest(staff, orderID, "after-removal", `{}`)), http.StatusForbidden, "/problems/forbidden")
	if after := writes(); after != before {
		t.Fatalf("refunds, provider refunds, audit entries, events, provider calls: %v after the refusal, %v before", after, before)
	}
	if r := e.do(e.refundRequest(staff, orderID, "after-removal", `{}`)); r.Status != http.StatusForbidden {
		t.Fatalf("the retry: %d %s, want 403 again", r.Status, r.Body)
	}
}
