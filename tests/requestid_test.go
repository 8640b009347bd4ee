package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/payments"
)

func withRequestID(id string) http.Header { return http.Header{"X-Request-Id": {id}} }

// isNewID: the server made the id, a UUID, instead of keeping the client's.
func isNewID(id string) bool { return uuid.Validate(id) == nil }

// Every answer carries X-Request-Id: the client's own when it is 1 to 64
// characters of visible ASCII, else a new UUID — on the API, its problems
// (whose request_id is the same id) and the browser's pages.
func TestRequestIDIsTheClientsTokenOrANewOne(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, sent string
		kept       bool
	}{
		{"none", "", false},
		{"a token", "req-7f3a:retry/2", true},
		{"every visible character", "!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~", true},
		{"64 characters", strings.Repeat("a", 64), true},
		{"65 characters", strings.Repeat("a", 65), false},
		{"a space", "two words", false},
		{"a tab", "tab\there", false},
		{"beyond ASCII", "café", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var header http.Header
			if tc.sent != "" {
				header = withRequestID(tc.sent)
			}
			got := e.do(request{method: "GET", path: "/api/v1/products", header: header}).Header.Get("X-Request-Id")
			if tc.kept && got != tc.sent || !tc.kept && !isNewID(got) {
				t.Fatalf("sent %q, answered with %q", tc.sent, got)
			}
		})
	}
	first := e.do(request{method: "GET", path: "/api/v1/products"}).Header.Get("X-Request-Id")
	if second := e.do(request{method: "GET", path: "/api/v1/products"}).Header.Get("X-Request-Id"); second == first {
		t.Fatalf("two requests, one id %q", first)
	}
	missing := e.do(request{method: "GET", path: "/api/v1/orders/" + uuid.NewString(), token: e.signUp("ids@example.com"), header: withRequestID("problem-1")})
	isProblem(t, missing, http.StatusNotFound, "/problems/not-found")
	if missing.Header.Get("X-Request-Id") != "problem-1" || missing.json(t)["request_id"] != "problem-1" {
		t.Fatalf("a problem's ids: header %q, body %s", missing.Header.Get("X-Request-Id"), missing.Body)
	}
	for _, path := range []string{"/", "/login", "/static/app.css", "/healthz", "/no-such-page"} {
		r := e.do(request{method: "GET", path: path, header: withRequestID("page-1")})
		if r.Header.Get("X-Request-Id") != "page-1" {
			t.Errorf("GET %s (%d): X-Request-Id %q", path, r.Status, r.Header.Get("X-Request-Id"))
		}
	}
}

// The browser's error page shows the request's id in small print, for the
// shopper to quote.
func TestErrorPageShowsItsReference(t *testing.T) {
	e := newEnv(t)
	r := e.do(request{method: "GET", path: "/no-such-page", header: http.Header{"Accept": {"text/html"}, "X-Request-Id": {"ref-42"}}})
	if r.Status != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %s", r.Status, r.Header.Get("Content-Type"))
	}
	if !bytes.Contains(r.Body, []byte(`<small>Reference: ref-42</small>`)) {
		t.Fatalf("the error page has no reference:\n%s", r.Body)
	}
	made := e.do(request{method: "GET", path: "/no-such-page", header: http.Header{"Accept": {"text/html"}}})
	if id := made.Header.Get("X-Request-Id"); !isNewID(id) || !bytes.Contains(made.Body, []byte("Reference: "+id+"<")) {
		t.Fatalf("the page's reference is not its id %q", id)
	}
}

// A replay sends its stored body byte for byte — a final problem's keeps
// the first request's request_id — and the id of the request it answers in
// the header only: the id is never stored with the answer, and a replay
// from the database (another instance) is the same as one from memory.
func TestReplayKeepsItsBodyWithTheNewRequestID(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("replay-ids@example.com")
	other := httptest.NewServer(newServer(t, e.deps))
	t.Cleanup(other.Close)
	order := request{method: "POST", path: "/api/v1/orders", token: token, key: key("order-ids"), body: orderBody(e.products()[0], 1)}
	orderID := e.replaysWithNewIDs(t, order, other.URL, http.StatusCreated)["id"].(string)
	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("pay-ids"), body: payBody(payments.MethodChargeDeclined)}
	declined := e.replaysWithNewIDs(t, pay, other.URL, http.StatusPaymentRequired)
	if declined["request_id"] != "first" {
		t.Fatalf("the declined payment's stored problem: %v", declined)
	}
	var rows []middleware.IdempotencyKey
	if err := e.db.Find(&rows).Error; err != nil || len(rows) != 2 {
		t.Fatalf("%d keys: %v", len(rows), err)
	}
	for _, row := range rows {
		if strings.Contains(strings.ToLower(row.Headers), "request-id") {
			t.Errorf("key %s stores the request id: %s", row.Key, row.Headers)
		}
	}
}

// replaysWithNewIDs sends r as "first", then again as "second" to this
// instance (from memory) and as "third" to other (from the database), and
// returns the first answer's body, after checking each replay's.
func (e *env) replaysWithNewIDs(t *testing.T, r request, other string, status int) map[string]any {
	t.Helper()
	r.header = withRequestID("first")
	first := e.do(r)
	if first.Status != status || first.Header.Get("X-Request-Id") != "first" {
		t.Fatalf("%s %s: %d, id %q: %s", r.method, r.path, first.Status, first.Header.Get("X-Request-Id"), first.Body)
	}
	replays := map[string]string{"second": e.url, "third": other}
	for id, url := range replays {
		r.header = withRequestID(id)
		at := &env{t: t, url: url}
		again := at.do(r)
		if !again.replayed() || again.Status != status || again.Header.Get("X-Request-Id") != id || !bytes.Equal(again.Body, first.Body) {
			t.Errorf("replay %s: %d, replayed %v, id %q, body\n%s\nwant\n%s", id, again.Status, again.replayed(), again.Header.Get("X-Request-Id"), again.Body, first.Body)
		}
	}
	return first.json(t)
}

// Every log line written while serving a request carries its request_id:
// the request line, and the payments service's, which log with the
// request's context; the lines of another request carry its own.
func TestLogLinesCarryTheRequestID(t *testing.T) {
	var logs testkit.Buffer
	e := newEnv(t,
		func(d *setup) { d.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) },
		withProvider(func(p payments.Provider) payments.Provider {
			return &failing{Provider: p, err: errors.New("connection reset"), n: 1}
		}))
	token := e.signUp("log-ids@example.com")
	orderID := e.createOrder(token, "log-order", orderBody(e.products()[0], 1))
	pay := request{method: "POST", path: "/api/v1/orders/" + orderID + "/payments", token: token, key: key("log-pay"), body: payBody(payments.MethodVisa), header: withRequestID("log-me-1")}
	if r := e.do(pay); r.Status != http.StatusBadGateway {
		t.Fatalf("a lost provider answer: %d %s", r.Status, r.Body)
	}
	byID := map[string][]string{}
	requests := 0
	scanner := bufio.NewScanner(strings.NewReader(logs.String()))
	for scanner.Scan() {
		var line struct {
			Msg       string
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line.Msg == "request" {
			requests++
		}
		byID[line.RequestID] = append(byID[line.RequestID], line.Msg)
	}
	if got := strings.Join(byID["log-me-1"], ", "); got != "payment provider failed, request" {
		t.Fatalf("the lines of request log-me-1: %s\n%s", got, logs.String())
	}
	if lines := byID[""]; requests != 4 || len(byID) != requests || lines != nil {
		t.Fatalf("%d requests (sign-up, token, order, payment) with %d ids, and lines of none: %v\n%s", requests, len(byID), lines, logs.String())
	}
}
