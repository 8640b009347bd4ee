package tests

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/internal/testkit"
)

// The load balancer of these tests runs on 127.0.0.1; its clients come
// from other loopback addresses.
const proxyAddress = "127.0.0.1"

// behindProxy is a shop that trusts the proxy of proxyTo: TRUSTED_PROXIES=127.0.0.1.
func behindProxy(d *setup) {
	d.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(proxyAddress + "/32")}
}

// proxyTo puts a reverse proxy in front of base, as a load balancer would:
// httputil.ReverseProxy, over real HTTP on 127.0.0.1, which appends each
// client's address to the X-Forwarded-For the client sent. Its URL.
func proxyTo(t *testing.T, base string) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(proxy.Close)
	return proxy.URL
}

// logInVia asks base for a token from the loopback address from, with the
// X-Forwarded-For and X-Real-IP headers forged (none when empty).
func logInVia(t *testing.T, base, from, forged, email, password string) response {
	t.Helper()
	var header http.Header
	if forged != "" {
		header = http.Header{"X-Forwarded-For": {forged}, "X-Real-Ip": {forged}}
	}
	r, err := sendTo(base, request{method: "POST", path: "/api/v1/tokens", from: from, header: header,
		body: fmt.Sprintf(`{"email":%q,"password":%q}`, email, password)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// hitsByAddress is the address limit's count of the minute, per address.
func (e *env) hitsByAddress() map[string]int {
	e.t.Helper()
	var rows []accounts.AddressMinute
	if err := e.db.Find(&rows).Error; err != nil {
		e.t.Fatal(err)
	}
	hits := map[string]int{}
	for _, r := range rows {
		hits[r.Address] += r.Hits
	}
	return hits
}

// failuresByAddress counts the failed log-ins recorded, per address.
func (e *env) failuresByAddress() map[string]int {
	e.t.Helper()
	var rows []accounts.LoginFailure
	if err := e.db.Find(&rows).Error; err != nil {
		e.t.Fatal(err)
	}
	failures := map[string]int{}
	for _, r := range rows {
		failures[r.Address]++
	}
	return failures
}

// Behind a trusted proxy, each client is its own address: one that spends
// CREDENTIALS_PER_MINUTE gets 429, forged X-Forwarded-For or not, and
// another, through the same proxy, is let in. The counts in the database
// are the clients', none the proxy's, and so is the access log's
// client_ip.
func TestClientsBehindAProxyHaveTheirOwnBuckets(t *testing.T) {
	const perMinute = 3
	logs := &testkit.Buffer{}
	e := newEnv(t, behindProxy, func(d *setup) { d.Logger = slog.New(slog.NewTextHandler(logs, nil)) }, func(d *setup) { d.CredentialsPerMinute = perMinute })
	proxy := proxyTo(t, e.url)
	const first, second = "127.0.0.2", "127.0.0.3"
	if r, err := sendTo(proxy, request{method: "POST", path: "/api/v1/users", from: first, body: `{"email":"ann@example.com","password":"correct horse"}`}); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("sign up through the proxy: %v %+v", err, r)
	}
	for i := 1; i < perMinute; i++ {
		if r := logInVia(t, proxy, first, "", "ann@example.com", "correct horse"); r.Status != http.StatusCreated {
			t.Fatalf("log-in %d: %d %s", i, r.Status, r.Body)
		}
	}
	for _, forged := range []string{"", "198.51.100.7", "198.51.100.8, 127.0.0.1"} {
		r := logInVia(t, proxy, first, forged, "ann@example.com", "correct horse")
		isProblem(t, r, http.StatusTooManyRequests, "/problems/too-many-requests")
	}
	if r := logInVia(t, proxy, second, "", "ann@example.com", "correct horse"); r.Status != http.StatusCreated {
		t.Fatalf("another client behind the same proxy: %d %s, want let in", r.Status, r.Body)
	}
	want := map[string]int{first: perMinute + 3, second: 1}
	if got := e.hitsByAddress(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("address counts %v, want %v (the clients', not the proxy's %s)", got, want, proxyAddress)
	}
	if e.count("api_tokens") != perMinute {
		t.Fatalf("%d tokens issued, want %d", e.count("api_tokens"), perMinute)
	}
	for _, addr := range []string{first, second} {
		if !strings.Contains(logs.String(), "client_ip="+addr) {
			t.Fatalf("no request line logs client_ip=%s:\n%s", addr, logs.String())
		}
	}
}

// Behind a trusted proxy, an attacker fails the owner's password from one
// address until refused, on the API and the log-in form. The owner, from
// another address behind the same proxy, signs in at once on both; every
// failure recorded is the attacker's address, none the proxy's.
func TestAttackerBehindAProxyCannotLockOutTheOwner(t *testing.T) {
	const failures, window = 4, 15 * time.Minute
	e := newEnv(t, behindProxy, func(d *setup) { d.LoginFailures, d.LoginFailureWindow = failures, window })
	proxy := proxyTo(t, e.url)
	e.signUp("owner@example.com")
	const attacker, owner = "127.0.0.3", "127.0.0.2"
	refused := 0
	for i := range 3 * failures {
		r := logInVia(t, proxy, attacker, fmt.Sprint("203.0.113.", i), "owner@example.com", fmt.Sprint("a guess ", i))
		if r.Status == http.StatusTooManyRequests {
			refused++
			secs, _ := strconv.Atoi(r.Header.Get("Retry-After"))
			e.clock.Advance(time.Duration(min(secs, 60)) * time.Second)
		}
	}
	if refused == 0 {
		t.Fatal("the attacker was never refused")
	}
	if got := e.failuresByAddress(); len(got) != 1 || got[attacker] != failures {
		t.Fatalf("failures recorded by address %v, want %d, all from %s", got, failures, attacker)
	}
	tokens := e.count("api_tokens")
	if r := logInVia(t, proxy, owner, "", "owner@example.com", "correct horse"); r.Status != http.StatusCreated {
		t.Fatalf("the owner, from another address behind the proxy: %d %s", r.Status, r.Body)
	}
	isProblem(t, logInVia(t, proxy, attacker, "", "owner@example.com", "correct horse"), http.StatusTooManyRequests, "/problems/too-many-requests")
	if got := e.count("api_tokens"); got != tokens+1 {
		t.Fatalf("%d tokens issued to the owner, want 1", got-tokens)
	}
	form := url.Values{"email": {"owner@example.com"}, "password": {webPassword}}
	isPage(t, e.shopperAt(proxy, dialingFrom(attacker)).post("/login", form), http.StatusTooManyRequests)
	if r := e.shopperAt(proxy, dialingFrom(owner)).post("/login", form); r.Status != http.StatusSeeOther {
		t.Fatalf("the owner's browser, behind the proxy: %d %s, want signed in", r.Status, r.Body)
	}
}

// With no trusted proxy (TRUSTED_PROXIES empty, the default), forged
// X-Forwarded-For and X-Real-IP headers buy nothing: an attacker who sends
// a new address with each request is one address, its own, refused past
// CREDENTIALS_PER_MINUTE and past LOGIN_FAILURES, while the owner, from
// another address, signs in.
func TestForgedForwardedForBuysNothing(t *testing.T) {
	const perMinute, failures = 6, 2
	e := newEnv(t, func(d *setup) {
		d.CredentialsPerMinute, d.LoginFailures, d.LoginFailureWindow = perMinute, failures, 15*time.Minute
	})
	const attacker = "127.0.0.3"
	e.signUp("owner@example.com") // two credential requests, from 127.0.0.1
	var got, want []int
	for i := range perMinute + 2 {
		got = append(got, logInVia(t, e.url, attacker, fmt.Sprint("198.51.100.", i), "owner@example.com", "correct horse").Status)
		if i < perMinute {
			want = append(want, http.StatusCreated)
		} else {
			want = append(want, http.StatusTooManyRequests)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("answers %v, want %v: the forged addresses were counted apart", got, want)
	}
	wantHits := map[string]int{"127.0.0.1": 2, attacker: perMinute + 2}
	if got := e.hitsByAddress(); fmt.Sprint(got) != fmt.Sprint(wantHits) {
		t.Fatalf("address counts %v, want %v", got, wantHits)
	}
	e.clock.Advance(time.Minute) // a new minute: now the failed log-ins
	for i, want := range []int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusTooManyRequests} {
		if r := logInVia(t, e.url, attacker, fmt.Sprint("203.0.113.", i), "owner@example.com", "a wrong guess"); r.Status != want {
			t.Fatalf("guess %d with a forged address: %d %s, want %d", i+1, r.Status, r.Body, want)
		}
	}
	isProblem(t, logInVia(t, e.url, attacker, "192.0.2.99", "owner@example.com", "correct horse"), http.StatusTooManyRequests, "/problems/too-many-requests")
	if got := e.failuresByAddress(); len(got) != 1 || got[attacker] != failures {
		t.Fatalf("failures recorded by address %v, want %d, all from %s", got, failures, attacker)
	}
	tokens := e.count("api_tokens")
	if r := logInVia(t, e.url, "127.0.0.2", "", "owner@example.com", "correct horse"); r.Status != http.StatusCreated || e.count("api_tokens") != tokens+1 {
		t.Fatalf("the owner from another address: %d %s", r.Status, r.Body)
	}
}

// dialingFrom is a transport whose connections come from the loopback
// address from.
func dialingFrom(from string) http.RoundTripper {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}
}
