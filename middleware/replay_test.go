package middleware

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
)

func TestReplayHeaders(t *testing.T) {
	h := newHarness(t, withHooks(hooks{after: func(c *gin.Context, _ int) {
		c.SetCookie("session", "s3cr3t", 3600, "/", "", false, true)
		c.Header("X-Custom", "first")
		c.Header("ETag", `"v1"`)
		c.Header("Cache-Control", "no-store")
		c.Writer.Header().Add("Link", `</widgets/1>; rel="self"`)
		c.Writer.Header().Add("Link", `</widgets>; rel="collection"`)
	}}))

	first := h.do(call{key: `"k-1"`, body: `{"name":"bolt","size":1}`})
	wantAnswer(t, first, http.StatusCreated, false)
	if first.header.Get("Set-Cookie") == "" || first.header.Get("X-Custom") != "first" {
		t.Fatalf("first answer lacks the handler's own headers: %v", first.header)
	}
	if first.header.Values(ReplayedHeader) != nil {
		t.Fatalf("first answer has %s: %v", ReplayedHeader, first.header)
	}

	// The same operation: bare key, other key order, other whitespace, 1.0.
	again := h.do(call{key: `k-1`, body: "{ \"size\": 1.0,\n \"name\": \"bolt\" }"})
	wantAnswer(t, again, http.StatusCreated, true)
	if again.body != first.body {
		t.Fatalf("replayed body %q, want the original %q", again.body, first.body)
	}
	for _, name := range []string{"Content-Type", "Location", "ETag", "Link", "Cache-Control"} {
		if got, want := again.header.Values(name), first.header.Values(name); len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("replayed %s = %q, want the original %q", name, got, want)
		}
	}
	for _, name := range []string{"Set-Cookie", "X-Custom"} {
		if v := again.header.Values(name); v != nil {
			t.Errorf("replay sends %s: %q", name, v)
		}
	}
	derived := h.wantRuns("/widgets/1", 1)
	h.wantWidgets(derived[0] + "#1")
	if err := h.mw.replays.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	k, _ := h.key("alice", "k-1")
	if k.State != KeyCompleted || k.Status != http.StatusCreated || storedReplays(t, h.db, "alice", "k-1") != 1 || string(k.Body) != first.body {
		t.Fatalf("stored key = %+v, want completed 201 with the original body and one replay", k)
	}
}

// The answer reaches the client only after the business writes and the
// key's outcome are committed: the writer checks the database the moment
// the middleware starts sending.
func TestAnswerIsSentAfterCommit(t *testing.T) {
	type sight struct {
		keys, widgets []string
		err           error
	}
	seen := make(chan sight, 4)
	h := newHarness(t, withOnSend(func(db *gorm.DB) {
		keys, err := keyStates(db)
		widgets, err2 := widgetRefs(db)
		if err == nil {
			err = err2
		}
		seen <- sight{keys, widgets, err}
	}))

	ok := h.do(call{key: "ok", path: "/widgets/1", body: `{}`})
	wantAnswer(t, ok, http.StatusCreated, false)
	s := testkit.Recv(t, seen, "the first answer")
	wantWidget := ok.derived() + "#1"
	if s.err != nil || !slices.Equal(s.keys, []string{"alice/ok=completed"}) || !slices.Equal(s.widgets, []string{wantWidget}) {
		t.Fatalf("when the answer left: keys %q, business rows %q (%v); want the completed key and %s", s.keys, s.widgets, s.err, wantWidget)
	}

	bad := h.do(call{key: "bad", path: "/widgets/2?status=422", body: `{}`})
	wantAnswer(t, bad, http.StatusUnprocessableEntity, false)
	s = testkit.Recv(t, seen, "the 422")
	if s.err != nil || !slices.Equal(s.keys, []string{"alice/bad=released", "alice/ok=completed"}) || !slices.Equal(s.widgets, []string{wantWidget}) {
		t.Fatalf("when the 422 left: keys %q, business rows %q (%v); want bad released and its row rolled back", s.keys, s.widgets, s.err)
	}
	h.wantWidgets(wantWidget)
}

// A client that disconnects does not cancel the operation: it runs to its
// recorded end and a retry gets its answer.
func TestClientDisconnectDoesNotCancelRecording(t *testing.T) {
	entered := make(chan struct{}, 1)
	sent := make(chan struct{}, 2)
	h := newHarness(t, withOnSend(func(*gorm.DB) { sent <- struct{}{} }), withHooks(hooks{before: func(c *gin.Context, run int) {
		if run == 1 {
			entered <- struct{}{}
			select {
			case <-c.MustGet(clientCtxKey).(context.Context).Done():
			case <-time.After(5 * time.Second):
				t.Error("the server did not notice the client leave")
			}
		}
	}}))
	ctx, cancel := context.WithCancel(context.Background())
	c := call{key: "k", body: `{}`, ctx: ctx}

	aDone := h.async(c)
	testkit.Recv(t, entered, "the handler")
	cancel()
	testkit.Recv(t, aDone, "the client to give up")
	testkit.Recv(t, sent, "the middleware to finish")

	h.wantKeys("alice/k=completed")
	derived := h.wantRuns("/widgets/1", 1)
	h.wantWidgets(derived[0] + "#1")
	c.ctx = nil
	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, true)
	if retry.run() != 1 {
		t.Fatalf("retry got %s, want the first run's answer", retry.body)
	}
}

// Every answer, first sent or replayed, is framed by its length: net/http
// computes it for a body that fits its buffer (a Content-Length the handler
// set is not kept), the middleware sets it for a longer one; never chunked.
func TestAnswersAreFramedByTheirLength(t *testing.T) {
	h := newHarness(t)
	r := gin.New()
	r.Use(h.authenticate)
	r.POST("/sized", h.mw.Require(), func(c *gin.Context) {
		n, _ := strconv.Atoi(c.Query("n"))
		c.Header("Content-Length", "1") // wrong: never sent
		if c.Query("redirect") != "" {
			c.Redirect(http.StatusSeeOther, "/elsewhere")
			return
		}
		c.Data(http.StatusCreated, "text/plain", bytes.Repeat([]byte("x"), n))
	})
	srv := httptest.NewServer(r)
	t.Cleanup(func() { closeServer(t, srv) })
	for _, query := range []string{"n=0", "n=300", "n=2048", "n=2049", "n=5000", "redirect=1"} {
		for i, replayed := range []bool{false, true} {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/sized?"+query, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Test-User", "alice")
			req.Header.Set("Idempotency-Key", query)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil || (resp.Header.Get(ReplayedHeader) == "true") != replayed {
				t.Fatalf("%s, answer %d: %v, replayed %q", query, i+1, err, resp.Header.Get(ReplayedHeader))
			}
			if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0 {
				t.Errorf("%s, answer %d (%d): Content-Length %d, Transfer-Encoding %v, for a body of %d bytes",
					query, i+1, resp.StatusCode, resp.ContentLength, resp.TransferEncoding, len(body))
			}
		}
	}
}

// A released key's retry takes it over as the same operation, on the same
// row: the replays of the answer it completes count on that row.
func TestReplaysAfterATakeoverCountOnTheKey(t *testing.T) {
	h := newHarness(t, withHooks(hooks{after: func(c *gin.Context, run int) {
		if run == 1 {
			c.Set(statusKey, http.StatusServiceUnavailable) // released: the retry runs again
		}
	}}))
	c := call{key: "taken", body: `{}`}
	wantAnswer(t, h.do(c), http.StatusServiceUnavailable, false)
	before, _ := h.key("alice", "taken")
	wantAnswer(t, h.do(c), http.StatusCreated, false)
	if !slices.Contains(h.observed(), OutcomeRetried) {
		t.Fatalf("outcomes %v; want the retry to take the released key over", h.observed())
	}
	for range 2 {
		wantAnswer(t, h.do(c), http.StatusCreated, true)
	}
	if err := h.mw.replays.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, _ := h.key("alice", "taken")
	if n := storedReplays(t, h.db, "alice", "taken"); n != 2 || after.ID != before.ID || after.OperationID != before.OperationID {
		t.Fatalf("replays %d on row %d (op %s), want 2 on row %d (op %s)", n, after.ID, after.OperationID, before.ID, before.OperationID)
	}
}
