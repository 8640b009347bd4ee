package tests

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/config"
	"gorm.io/gorm"
)

func withTokenCacheTTL(d time.Duration) option {
	return func(deps *setup) { deps.TokenCacheTTL = d }
}

// statementLog records the table of every statement sent through a
// database handle and the sessions made from it.
type statementLog struct {
	mu     sync.Mutex
	tables []string
}

func logStatements(t *testing.T, db *gorm.DB) *statementLog {
	t.Helper()
	l := &statementLog{}
	note := func(tx *gorm.DB) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.tables = append(l.tables, tx.Statement.Table)
	}
	cb := db.Callback()
	for _, err := range []error{
		cb.Query().After("gorm:query").Register("tests:log", note),
		cb.Row().After("gorm:row").Register("tests:log", note),
		cb.Raw().After("gorm:raw").Register("tests:log", note),
		cb.Create().After("gorm:create").Register("tests:log", note),
		cb.Update().After("gorm:update").Register("tests:log", note),
		cb.Delete().After("gorm:delete").Register("tests:log", note),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// take returns the tables logged since the last take.
func (l *statementLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	tables := l.tables
	l.tables = nil
	return tables
}

// at sends r to another instance of e's shop.
func (e *env) at(base string, r request) response {
	e.t.Helper()
	saved := e.url
	e.url = base
	defer func() { e.url = saved }()
	return e.do(r)
}

func me(token string) request { return request{method: "GET", path: "/api/v1/me", token: token} }

// A cached token lookup costs no database statement; a miss costs the
// token's read and its user's, and so does every request with the cache
// off (TOKEN_CACHE_TTL=0). A lookup is read again once TOKEN_CACHE_TTL has
// passed on the server's clock, and a failed one is never kept.
func TestCachedTokenLookupReadsNothing(t *testing.T) {
	lookup := []string{"api_tokens", "users"}
	for _, tc := range []struct {
		name   string
		opts   []option
		reads  [][]string // of three requests in a row, then one after the TTL
		cached bool
	}{
		{"default TTL", nil, [][]string{lookup, nil, nil, lookup}, true},
		{"cache off", []option{withTokenCacheTTL(-1)}, [][]string{lookup, lookup, lookup, lookup}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			log := logStatements(t, e.db)
			token := e.signUp("ann@example.com")
			for i, want := range tc.reads {
				if i == len(tc.reads)-1 {
					e.clock.Advance(config.Default().TokenCacheTTL)
				}
				log.take()
				if r := e.do(me(token)); r.Status != http.StatusOK {
					t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
				}
				if got := log.take(); !slices.Equal(got, want) {
					t.Fatalf("request %d read %v, want %v", i, got, want)
				}
			}
			for i := range 2 {
				log.take()
				isProblem(t, e.do(me("shp_forged")), http.StatusUnauthorized, "/problems/unauthorized")
				if got := log.take(); !slices.Equal(got, []string{"api_tokens"}) {
					t.Fatalf("forged token, request %d, read %v, want the token each time", i, got)
				}
			}
		})
	}
}

// A revocation takes effect at once on the instance that made it, however
// long its TOKEN_CACHE_TTL, though the token's lookup was cached there;
// the revoked token writes nothing.
func TestTokenRevocationTakesEffectAtOnceOnItsInstance(t *testing.T) {
	e := newEnv(t, withTokenCacheTTL(time.Hour))
	log := logStatements(t, e.db)
	token := e.signUp("ann@example.com")
	other := e.signUp("bob@example.com")
	for range 2 {
		if r := e.do(me(token)); r.Status != http.StatusOK {
			t.Fatalf("/me: %d %s", r.Status, r.Body)
		}
	}
	log.take()
	if r := e.do(me(token)); r.Status != http.StatusOK || len(log.take()) != 0 {
		t.Fatalf("/me: %d %s; want it answered from the cache", r.Status, r.Body)
	}

	if r := e.do(request{method: "DELETE", path: "/api/v1/tokens/current", token: token}); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	if n := e.count("api_tokens", "revoked_at IS NOT NULL"); n != 1 {
		t.Fatalf("%d revoked tokens, want 1", n)
	}
	before := e.sideEffects()
	isProblem(t, e.do(me(token)), http.StatusUnauthorized, "/problems/token-revoked")
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("after-revoke"), body: orderBody(e.products()[0], 1)}),
		http.StatusUnauthorized, "/problems/token-revoked")
	if got := e.sideEffects(); got != before {
		t.Fatalf("a revoked token wrote %+v, want %+v", got, before)
	}
	if r := e.do(me(other)); r.Status != http.StatusOK {
		t.Fatalf("another user's token stopped working: %d %s", r.Status, r.Body)
	}
}

// Two instances on one database: a token revoked on one still works on
// the other while that one's cached lookup is fresh — an order placed
// with it is written — and is refused there once TOKEN_CACHE_TTL (the
// default, 5 seconds) has passed since that lookup, so within 5 seconds of
// the revocation; then it writes nothing.
func TestTokenRevocationReachesOtherInstancesWithinTheCacheTTL(t *testing.T) {
	e := newEnv(t)
	other := httptest.NewServer(newServer(t, e.deps))
	t.Cleanup(other.Close)
	token := e.signUp("ann@example.com")
	product := e.products()[0]
	order := func(k string) request {
		return request{method: "POST", path: "/api/v1/orders", token: token, key: key(k), body: orderBody(product, 1)}
	}

	if r := e.at(other.URL, me(token)); r.Status != http.StatusOK {
		t.Fatalf("/me on the other instance: %d %s", r.Status, r.Body)
	}
	e.clock.Advance(time.Second)
	if r := e.do(request{method: "DELETE", path: "/api/v1/tokens/current", token: token}); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	isProblem(t, e.do(me(token)), http.StatusUnauthorized, "/problems/token-revoked")

	e.clock.Advance(config.Default().TokenCacheTTL - time.Second - time.Millisecond)
	if r := e.at(other.URL, order("within-the-ttl")); r.Status != http.StatusCreated {
		t.Fatalf("an order on the other instance a millisecond before its lookup goes stale: %d %s", r.Status, r.Body)
	}
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want the one placed while the other instance's lookup was fresh", n)
	}

	e.clock.Advance(time.Millisecond)
	before := e.sideEffects()
	isProblem(t, e.at(other.URL, me(token)), http.StatusUnauthorized, "/problems/token-revoked")
	isProblem(t, e.at(other.URL, order("past-the-ttl")), http.StatusUnauthorized, "/problems/token-revoked")
	if got := e.sideEffects(); got != before || got.orders != 1 {
		t.Fatalf("past the TTL, the revoked token wrote %+v, want %+v", got, before)
	}
}

// A cached lookup does not outlive the token: at its expires_at the token
// is refused, from the cache, though the lookup is still fresh.
func TestCachedTokenStopsAtItsExpiry(t *testing.T) {
	e := newEnv(t, withTokenTTL(time.Hour), withTokenCacheTTL(24*time.Hour))
	log := logStatements(t, e.db)
	e.signUp("ann@example.com")
	token, row := e.token("ann@example.com")
	if r := e.do(me(token)); r.Status != http.StatusOK {
		t.Fatalf("/me: %d %s", r.Status, r.Body)
	}

	e.clock.Advance(row.ExpiresAt.Sub(e.clock.Now()) - time.Second)
	log.take()
	if r := e.do(me(token)); r.Status != http.StatusOK || len(log.take()) != 0 {
		t.Fatalf("a second before expiry: %d %s; want it answered from the cache", r.Status, r.Body)
	}
	e.clock.Advance(time.Second)
	before := e.sideEffects()
	log.take()
	isProblem(t, e.do(me(token)), http.StatusUnauthorized, "/problems/token-expired")
	if got := log.take(); len(got) != 0 {
		t.Fatalf("the expired token was read again (%v): want it refused from the cache", got)
	}
	isProblem(t, e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("late"), body: orderBody(e.products()[0], 1)}),
		http.StatusUnauthorized, "/problems/token-expired")
	if got := e.sideEffects(); got != before {
		t.Fatalf("an expired token wrote %+v, want %+v", got, before)
	}
}
