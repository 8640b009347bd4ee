package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop/shop/internal/testkit"
)

// hangUp serves next, but holds the request for path until its client has
// hung up: it reads the body, says so on reached, and waits for the
// request's context to end (the server sees the connection close), so the
// handler runs for a client already gone, every time. served closes once
// the answer, its log line and its count are done.
func hangUp(next http.Handler, path string, reached, served chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			next.ServeHTTP(w, r)
			return
		}
		defer close(served)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		close(reached)
		<-r.Context().Done()
		next.ServeHTTP(w, r)
	})
}

// A client that hangs up mid-request is not a server error: sign-up and an
// order's read, their handlers failing on the cancelled context, are logged
// below ERROR and counted as 499, the client-closed status the idempotency
// middleware uses, and no 500 is counted.
func TestClientHangUpIsNotAServerError(t *testing.T) {
	var logs testkit.Buffer
	e := newEnv(t, func(d *setup) { d.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	token := e.signUp("hangs-up@example.com")
	orderID := e.createOrder(token, "hang-up-order", orderBody(e.products()[0], 1))
	e.do(request{method: "GET", path: "/api/v1/orders/" + orderID, token: token}) // the token is cached: the read is the handler's
	cases := []struct {
		method, path, route, body string
	}{
		{"POST", "/api/v1/users", "/api/v1/users", `{"email":"gone@example.com","password":"correct horse"}`},
		{"GET", "/api/v1/orders/" + orderID, "/api/v1/orders/:id", ""},
	}
	for _, tc := range cases {
		t.Run(tc.route, func(t *testing.T) {
			reached, served := make(chan struct{}), make(chan struct{})
			srv := httptest.NewServer(hangUp(e.server, tc.path, reached, served))
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			id := uuid.NewString()
			req.Header.Set("X-Request-Id", id)
			sent := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				sent <- err
			}()
			<-reached
			cancel()
			if err := <-sent; !errors.Is(err, context.Canceled) {
				t.Fatalf("the client did not hang up: %v", err)
			}
			<-served
			line := requestLine(t, logs.String(), id)
			if line["level"] != "INFO" && line["level"] != "WARN" || line["status"] != 499.0 {
				t.Fatalf("the hang-up is logged as %v", line)
			}
			wantSeries(t, e.metrics(), `shop_http_requests_total{method="`+tc.method+`",route="`+tc.route+`",status="499"} 1`)
		})
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) || strings.Contains(e.metrics(), `status="500"`) {
		t.Fatalf("a hang-up is counted or logged as a server error:\n%s", logs.String())
	}
}

// requestLine is the log's one request line of the request id.
func requestLine(t *testing.T, logs, id string) map[string]any {
	t.Helper()
	var found []map[string]any
	scanner := bufio.NewScanner(strings.NewReader(logs))
	for scanner.Scan() {
		var line map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line["request_id"] == id && line["msg"] == "request" {
			found = append(found, line)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d request lines of %s:\n%s", len(found), id, logs)
	}
	return found[0]
}

// A JSON body cut short by a client that hangs up is a malformed request on
// an API route too, where the JSON-object check reads the body before the
// middleware: the cancel, which takes an empty body, neither runs nor
// claims its key.
func TestAJSONBodyCutShortCancelsNothing(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("cut-short@example.com")
	orderID := e.createOrder(token, "cut-short-order", orderBody(e.products()[0], 1))
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "POST /api/v1/orders/"+orderID+"/cancel HTTP/1.1\r\nHost: test\r\n"+
		"Authorization: Bearer "+token+"\r\nIdempotency-Key: cut-short\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\n\r\n{}"); err != nil { // 2 of the 100 bytes come: a JSON object so far
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a body cut short: %d, want 400", resp.StatusCode)
	}
	if n := e.count("orders", "id = ? AND status = ?", orderID, "pending"); n != 1 {
		t.Fatalf("the order is no longer pending (%d pending rows)", n)
	}
	if n := e.count("idempotency_keys", `"key" = ?`, "cut-short"); n != 0 {
		t.Fatalf("the key was claimed: %d rows", n)
	}
}
