package middleware

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// widget is the business row the test handler writes through Tx(c).
type widget struct {
	ID  uint
	Ref string `gorm:"uniqueIndex;not null"`
}

// runs records the handler's executions per path, with the derived key
// each one saw.
type runs struct {
	mu      sync.Mutex
	derived map[string][]string
}

func (r *runs) add(path, derived string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.derived[path] = append(r.derived[path], derived)
	return len(r.derived[path])
}

func (r *runs) of(path string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.derived[path])
}

// hooks let a test act inside the handler: before runs ahead of any write,
// after once the widget is written through the transaction. Both get the
// handler's run number for the path.
type hooks struct {
	before, after func(c *gin.Context, run int)
}

type probeKey struct{}

const (
	userKey      = "test.user"
	clientCtxKey = "test.clientContext"
	statusKey    = "test.status"
)

// harness is one engine behind a real HTTP server, with the middleware on
// POST /widgets/:id, over its own SQLite database.
type harness struct {
	t       *testing.T
	db      *gorm.DB
	clock   *testkit.Clock
	mw      *Idempotency
	url     string
	runs    *runs
	hooks   hooks
	wait    time.Duration
	lease   time.Duration
	timeout time.Duration
	now     func() time.Time // the middleware's clock: h.clock unless withRealClock
	// onSend is called when an answer first reaches the client's writer.
	onSend func(db *gorm.DB)
	// probe receives when a request sent with X-Test-Probe reads its key
	// and finds it in progress: the request is then waiting.
	probe chan struct{}
	// heartbeats, when set, replaces the heartbeat's ticker: the test ticks.
	heartbeats *heartbeats
	// render, when set, is the middleware's Config.Render.
	render func(*gin.Context, *problem.Problem)
	// entered counts the business handler's starts, claimed or not.
	entered atomic.Int64
}

type option func(*harness)

func withHooks(hk hooks) option             { return func(h *harness) { h.hooks = hk } }
func withWait(d time.Duration) option       { return func(h *harness) { h.wait = d } }
func withOnSend(f func(db *gorm.DB)) option { return func(h *harness) { h.onSend = f } }
func withLease(d time.Duration) option      { return func(h *harness) { h.lease = d } }
func withRealClock() option                 { return func(h *harness) { h.now = time.Now } }
func withTimeout(d time.Duration) option    { return func(h *harness) { h.timeout = d } }
func withRender(r func(*gin.Context, *problem.Problem)) option {
	return func(h *harness) { h.render = r }
}

// registerProbe makes the key read tell a request sent with a probe channel
// (in its context under probeKey{}) when it found the key in progress: the
// request is then waiting for the original.
func registerProbe(db *gorm.DB) error {
	return db.Callback().Query().After("gorm:query").Register("test:probe", func(tx *gorm.DB) {
		probe, ok := tx.Statement.Context.Value(probeKey{}).(chan struct{})
		rows, isKeys := tx.Statement.Dest.(*[]models.IdempotencyKey)
		if ok && isKeys && len(*rows) == 1 && (*rows)[0].State == models.KeyInProgress {
			select {
			case probe <- struct{}{}:
			default:
			}
		}
	})
}

func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	db := testkit.NewDB(t)
	if err := db.AutoMigrate(&models.IdempotencyKey{}, &widget{}); err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t: t, db: db, clock: testkit.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		runs: &runs{derived: map[string][]string{}}, wait: 2 * time.Second, lease: time.Minute, probe: make(chan struct{}, 1),
	}
	h.now = h.clock.Now
	for _, o := range opts {
		o(h)
	}
	err := registerProbe(db)
	if err != nil {
		t.Fatal(err)
	}
	h.mw = New(Config{
		DB: db, TTL: time.Hour, Lease: h.lease, Wait: h.wait, Timeout: h.timeout, Now: h.now,
		Scope:  func(c *gin.Context) string { return c.GetString(userKey) },
		Render: h.render,
		Logger: slog.New(slog.DiscardHandler),
	})
	if h.heartbeats != nil {
		h.mw.ticker = h.heartbeats.start
	}
	t.Cleanup(func() {
		if err := h.mw.Close(context.Background()); err != nil {
			t.Errorf("close middleware: %v", err)
		}
	})
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, _ any) { c.AbortWithStatus(http.StatusInternalServerError) }))
	r.Use(h.observe, h.authenticate)
	r.POST("/widgets/:id", h.mw.Require(), h.handle)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// observe wraps the writer the middleware sends its answers to.
func (h *harness) observe(c *gin.Context) {
	if h.onSend != nil {
		c.Writer = &observedWriter{ResponseWriter: c.Writer, onSend: func() { h.onSend(h.db) }}
	}
	c.Next()
}

// authenticate is the fake authentication: the user is whatever X-Test-User
// says, and nobody when it is absent.
func (h *harness) authenticate(c *gin.Context) {
	if user := c.GetHeader("X-Test-User"); user != "" {
		c.Set(userKey, user)
	}
	c.Set(clientCtxKey, c.Request.Context())
	if c.GetHeader("X-Test-Probe") != "" {
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), probeKey{}, h.probe))
	}
	c.Next()
}

// handle is the business handler: it writes one widget through the
// operation's transaction and answers with the status ?status asks for (201
// by default, or what an after hook sets), declared final when ?final=1.
func (h *harness) handle(c *gin.Context) {
	h.entered.Add(1)
	derived := DerivedKey(c)
	run := h.runs.add(c.Request.URL.Path, derived)
	if h.hooks.before != nil {
		h.hooks.before(c, run)
	}
	if err := Tx(c).Create(&widget{Ref: fmt.Sprintf("%s#%d", derived, run)}).Error; err != nil {
		c.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	if h.hooks.after != nil {
		h.hooks.after(c, run)
	}
	status := http.StatusCreated
	if s := c.Query("status"); s != "" {
		status, _ = strconv.Atoi(s)
	}
	if s := c.GetInt(statusKey); s != 0 {
		status = s
	}
	if c.Query("final") == "1" {
		Final(c)
	}
	c.Header("Location", fmt.Sprintf("/widgets/%d", run))
	c.JSON(status, gin.H{"run": run, "derived": derived, "status": status})
}

type observedWriter struct {
	gin.ResponseWriter
	once   sync.Once
	onSend func()
}

func (w *observedWriter) WriteHeaderNow() {
	w.once.Do(w.onSend)
	w.ResponseWriter.WriteHeaderNow()
}

func (w *observedWriter) Write(b []byte) (int, error) {
	w.once.Do(w.onSend)
	return w.ResponseWriter.Write(b)
}

func (w *observedWriter) WriteString(s string) (int, error) {
	w.once.Do(w.onSend)
	return w.ResponseWriter.WriteString(s)
}

// call is one request to the harness.
type call struct {
	user        string // X-Test-User: alice when empty, nobody when "-"
	key         string // the Idempotency-Key header value; none when empty
	path        string // /widgets/1 when empty
	contentType string // application/json when empty
	body        string
	bodyReader  io.Reader // sent instead of body, without a length (chunked)
	probe       bool
	ctx         context.Context
}

// answer is a response, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) replayed() bool { return a.header.Get(ReplayedHeader) == "true" }

func (a answer) problemType() string {
	var p problem.Problem
	_ = json.Unmarshal([]byte(a.body), &p)
	return p.Type
}

// run and derived read what the test handler answered.
func (a answer) run() int {
	var v struct{ Run int }
	_ = json.Unmarshal([]byte(a.body), &v)
	return v.Run
}

func (a answer) derived() string {
	var v struct{ Derived string }
	_ = json.Unmarshal([]byte(a.body), &v)
	return v.Derived
}

var client = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// do sends c. It may run on any goroutine: a failure is reported with
// Errorf and answers status 0.
func (h *harness) do(c call) answer {
	path, contentType, body := c.path, c.contentType, io.Reader(strings.NewReader(c.body))
	if path == "" {
		path = "/widgets/1"
	}
	if contentType == "" {
		contentType = "application/json"
	}
	if c.bodyReader != nil {
		body = struct{ io.Reader }{c.bodyReader}
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+path, body)
	if err != nil {
		h.t.Errorf("new request: %v", err)
		return answer{}
	}
	req.Header.Set("Content-Type", contentType)
	switch c.user {
	case "":
		req.Header.Set("X-Test-User", "alice")
	case "-":
	default:
		req.Header.Set("X-Test-User", c.user)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	if c.probe {
		req.Header.Set("X-Test-Probe", "1")
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			h.t.Errorf("POST %s: %v", path, err)
		}
		return answer{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Errorf("read answer of POST %s: %v", path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// keyStates lists every key row as scope/key=state, sorted; state is
// completed, in_progress, or released (in progress without an owner).
func keyStates(db *gorm.DB) ([]string, error) {
	var rows []models.IdempotencyKey
	if err := db.Find(&rows).Error; err != nil {
		return nil, err
	}
	names := []string{}
	for _, r := range rows {
		state := r.State
		if r.Released() {
			state = "released"
		}
		names = append(names, r.Scope+"/"+r.Key+"="+state)
	}
	slices.Sort(names)
	return names, nil
}

// widgetRefs lists the refs of the business rows, sorted.
func widgetRefs(db *gorm.DB) ([]string, error) {
	refs := []string{}
	err := db.Model(&widget{}).Order("ref").Pluck("ref", &refs).Error
	return refs, err
}

func (h *harness) key(scope, key string) (models.IdempotencyKey, bool) {
	h.t.Helper()
	k, ok, err := h.mw.store.find(context.Background(), scope, key)
	if err != nil {
		h.t.Fatal(err)
	}
	return k, ok
}

func (h *harness) wantKeys(want ...string) {
	h.t.Helper()
	if want == nil {
		want = []string{}
	}
	got, err := keyStates(h.db)
	if err != nil {
		h.t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		h.t.Fatalf("key rows = %q, want %q", got, want)
	}
}

func (h *harness) wantWidgets(want ...string) {
	h.t.Helper()
	if want == nil {
		want = []string{}
	}
	slices.Sort(want)
	got, err := widgetRefs(h.db)
	if err != nil {
		h.t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		h.t.Fatalf("business rows = %q, want %q", got, want)
	}
}

func (h *harness) wantRuns(path string, n int) []string {
	h.t.Helper()
	got := h.runs.of(path)
	if len(got) != n {
		h.t.Fatalf("handler ran %d times on %s, want %d", len(got), path, n)
	}
	return got
}

func wantAnswer(t *testing.T, a answer, status int, replayed bool) {
	t.Helper()
	if a.status != status || a.replayed() != replayed {
		t.Fatalf("answer %d (replayed %v) %s, want %d (replayed %v)", a.status, a.replayed(), a.body, status, replayed)
	}
}

func wantProblem(t *testing.T, a answer, typ problem.Type) {
	t.Helper()
	if a.status != typ.Status || a.problemType() != typ.URI() || a.header.Get("Content-Type") != problem.ContentType {
		t.Fatalf("answer %d %q %s, want a %d %s problem", a.status, a.header.Get("Content-Type"), a.body, typ.Status, typ.URI())
	}
}

// gate blocks the handler's runs it was made for until each is released,
// and reports each run on entered when it got there. Cleanup releases them
// all, so a failed test does not leave the server waiting.
type gate struct {
	entered chan int
	open    map[int]chan struct{}
	once    map[int]*sync.Once
}

func newGate(t *testing.T, runs ...int) *gate {
	g := &gate{entered: make(chan int, len(runs)), open: map[int]chan struct{}{}, once: map[int]*sync.Once{}}
	for _, run := range runs {
		g.open[run], g.once[run] = make(chan struct{}), &sync.Once{}
	}
	t.Cleanup(func() {
		for _, run := range runs {
			g.release(run)
		}
	})
	return g
}

func (g *gate) release(run int) { g.once[run].Do(func() { close(g.open[run]) }) }

func (g *gate) block(_ *gin.Context, run int) {
	if open, ok := g.open[run]; ok {
		g.entered <- run
		<-open
	}
}

// duplicateWhileRunning sends c, and, while the original is held at the
// gate, c again; it lets the original go once the duplicate has found the
// key in progress, and returns both answers.
func (h *harness) duplicateWhileRunning(g *gate, c call) (original, duplicate answer) {
	h.t.Helper()
	aDone := h.async(c)
	testkit.Recv(h.t, g.entered, "the original in the handler")
	waiter := c
	waiter.probe = true
	bDone := h.async(waiter)
	testkit.Recv(h.t, h.probe, "the duplicate to find the key in progress")
	g.release(1)
	return testkit.Recv(h.t, aDone, "the original's answer"), testkit.Recv(h.t, bDone, "the duplicate's answer")
}

// async sends c on its own goroutine; the answer arrives on the channel.
func (h *harness) async(c call) <-chan answer {
	done := make(chan answer, 1)
	go func() { done <- h.do(c) }()
	return done
}

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
	if k.State != models.KeyCompleted || k.Status != http.StatusCreated || k.Replays != 1 || string(k.Body) != first.body {
		t.Fatalf("stored key = %+v, want completed 201 with the original body and one replay", k)
	}
}

func TestKeyChecksAndScope(t *testing.T) {
	h := newHarness(t)
	body := `{"name":"bolt"}`
	steps := []struct {
		name     string
		call     call
		status   int
		problem  *problem.Type
		replayed bool
		runs     int // runs of /widgets/1 so far
	}{
		{"no user", call{user: "-", key: "k"}, 401, &problem.Unauthorized, false, 0},
		{"no key", call{}, 400, &problem.KeyMissing, false, 0},
		{"invalid key", call{key: `"k";p=1`}, 400, &problem.KeyInvalid, false, 0},
		{"two keys in one header", call{key: `"k", "j"`}, 400, &problem.KeyInvalid, false, 0},
		{"malformed JSON", call{key: "k", body: `{"name":`}, 400, &problem.MalformedRequest, false, 0},
		{"duplicate JSON keys", call{key: "k", body: `{"name":"a","name":"b"}`}, 400, &problem.MalformedRequest, false, 0},
		{"alice runs", call{key: "k", body: body}, 201, nil, false, 1},
		{"alice replays", call{key: `"k"`, body: body}, 201, nil, true, 1},
		{"bob's key of the same name is his own", call{user: "bob", key: "k", body: body}, 201, nil, false, 2},
		{"another body", call{key: "k", body: `{"name":"nut"}`}, 422, &problem.KeyReused, false, 2},
		{"another query", call{key: "k", body: body, path: "/widgets/1?x=1"}, 422, &problem.KeyReused, false, 2},
		{"another path parameter", call{key: "k", body: body, path: "/widgets/2"}, 422, &problem.KeyReused, false, 2},
	}
	for _, s := range steps {
		if s.call.body == "" {
			s.call.body = body
		}
		a := h.do(s.call)
		h.wantStep(s.name, a, s.status, s.problem, s.replayed, s.runs)
	}
	h.wantRuns("/widgets/2", 0)
	h.wantKeys("alice/k=completed", "bob/k=completed")
	derived := h.runs.of("/widgets/1")
	h.wantWidgets(derived[0]+"#1", derived[1]+"#2")
	alice, _ := h.key("alice", "k")
	bob, _ := h.key("bob", "k")
	if derived[0] == derived[1] || alice.OperationID == bob.OperationID || string(alice.Body) == string(bob.Body) {
		t.Fatalf("alice's and bob's keys share an operation or an answer: %+v %+v", alice, bob)
	}
	listed, err := h.mw.Keys(context.Background(), "bob", 10)
	if err != nil || len(listed) != 1 || listed[0].Key != "k" || listed[0].Body != nil {
		t.Fatalf("Keys(bob) = %+v, %v; want bob's one key without its body", listed, err)
	}
}

func TestFormKey(t *testing.T) {
	h := newHarness(t)
	const path = "/widgets/1?status=303"
	long := strings.Repeat("f", maxKeyLength)
	steps := []struct {
		name     string
		header   string
		body     string
		status   int
		problem  *problem.Type
		replayed bool
		runs     int
	}{
		{"field only", "", "name=bolt&color=red&idempotency_key=form-1", 303, nil, false, 1},
		{"resubmit, fields reordered", "", "idempotency_key=form-1&color=red&name=bolt", 303, nil, true, 1},
		{"header and field agree", `"form-2"`, "name=bolt&idempotency_key=form-2", 303, nil, false, 2},
		{"bare header and field agree", `form-2`, "idempotency_key=form-2&name=bolt", 303, nil, true, 2},
		{"header and field differ", "form-3", "name=bolt&idempotency_key=form-4", 400, &problem.KeyInvalid, false, 2},
		{"empty field", "", "name=bolt&idempotency_key=", 400, &problem.KeyInvalid, false, 2},
		{"empty field and a header", "form-5", "name=bolt&idempotency_key=", 400, &problem.KeyInvalid, false, 2},
		{"256-character field", "", "name=bolt&idempotency_key=" + long + "f", 400, &problem.KeyInvalid, false, 2},
		{"non-ASCII field", "", "name=bolt&idempotency_key=%C3%A9", 400, &problem.KeyInvalid, false, 2},
		{"no key", "", "name=bolt", 400, &problem.KeyMissing, false, 2},
		{"255-character field", "", "name=bolt&idempotency_key=" + long, 303, nil, false, 3},
		{"header only", "form-6", "name=bolt", 303, nil, false, 4},
		{"two key fields", "", "idempotency_key=form-1&idempotency_key=form-7&color=red&name=bolt", 400, &problem.KeyInvalid, false, 4},
	}
	var first answer
	for i, s := range steps {
		a := h.do(call{key: s.header, path: path, contentType: "application/x-www-form-urlencoded", body: s.body})
		h.wantStep(s.name, a, s.status, s.problem, s.replayed, s.runs)
		switch i {
		case 0:
			first = a
		case 1:
			if a.header.Get("Location") != first.header.Get("Location") || a.body != first.body {
				t.Fatalf("resubmit answered %v %q, want the original %v %q", a.header, a.body, first.header, first.body)
			}
		}
	}
	// The media type's case does not matter: a resubmission of form-1 with
	// another spelling is still a form carrying its key in a field.
	upper := h.do(call{path: path, contentType: "Application/X-WWW-Form-URLEncoded", body: "color=red&idempotency_key=form-1&name=bolt"})
	if upper.status != 303 || !upper.replayed() {
		t.Fatalf("form with an upper-case media type: %d replayed=%v %s", upper.status, upper.replayed(), upper.body)
	}
	h.wantKeys("alice/"+long+"=completed", "alice/form-1=completed", "alice/form-2=completed", "alice/form-6=completed")
	d := h.runs.of("/widgets/1")
	h.wantWidgets(d[0]+"#1", d[1]+"#2", d[2]+"#3", d[3]+"#4")
}

func TestPanicReleasesTheKey(t *testing.T) {
	h := newHarness(t, withHooks(hooks{after: func(_ *gin.Context, run int) {
		if run == 1 {
			panic("boom")
		}
	}}))
	c := call{key: "k", body: `{}`}

	wantAnswer(t, h.do(c), http.StatusInternalServerError, false)
	h.wantKeys("alice/k=released")
	h.wantWidgets()

	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 2)
	if retry.run() != 2 || derived[1] != derived[0] {
		t.Fatalf("retry answered %s after derived key %s; want the second run of the same operation", retry.body, derived[0])
	}
	h.wantKeys("alice/k=completed")
	h.wantWidgets(derived[0] + "#2")
}

func TestOutcomes(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		status int
		final  bool
		stored bool
	}{
		{200, false, true},
		{201, false, true},
		{303, false, true},
		{400, false, false},
		{401, false, false},
		{402, true, true},
		{403, false, false},
		{404, false, false},
		{409, false, false},
		{409, true, true},
		{422, false, false},
		{429, false, false},
		{500, false, false},
		{500, true, false},
		{502, false, false},
		{503, true, false},
	}
	var wantRows []string
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d final=%v", tt.status, tt.final), func(t *testing.T) {
			path := fmt.Sprintf("/widgets/%d", i)
			query := fmt.Sprintf("?status=%d", tt.status)
			if tt.final {
				query += "&final=1"
			}
			key := fmt.Sprintf("outcome-%d", i)
			c := call{key: key, path: path + query, body: `{}`}

			first := h.do(c)
			wantAnswer(t, first, tt.status, false)
			k, _ := h.key("alice", key)
			if tt.stored {
				if k.State != models.KeyCompleted || k.Status != tt.status || string(k.Body) != first.body {
					t.Fatalf("stored key = %+v, want completed with %d and the answer", k, tt.status)
				}
			} else if !k.Released() || k.LockedUntil.After(h.clock.Now()) {
				t.Fatalf("key = %+v, want it released: in progress, no owner, lease over", k)
			}

			second := h.do(c)
			derived := h.runs.of(path)
			if tt.stored {
				wantAnswer(t, second, tt.status, true)
				if second.body != first.body || len(derived) != 1 {
					t.Fatalf("replay %q after %d runs, want the original %q after 1", second.body, len(derived), first.body)
				}
				wantRows = append(wantRows, derived[0]+"#1")
				return
			}
			// A released key runs again, as the same operation.
			wantAnswer(t, second, tt.status, false)
			if second.run() != 2 || len(derived) != 2 || derived[0] != derived[1] {
				t.Fatalf("retry of a released key answered %s with derived keys %q, want a second run of the same operation", second.body, derived)
			}
		})
	}
	// Stored outcomes committed their business row; released ones rolled
	// theirs back.
	h.wantWidgets(wantRows...)
}

// A released key takes the next request with it, even a corrected one:
// it is a retry of the same operation, not a reuse of the key.
func TestReleasedKeyTakesACorrectedRequest(t *testing.T) {
	h := newHarness(t)
	const path = "/widgets/1"
	wantAnswer(t, h.do(call{key: "k", path: path + "?status=422", body: `{"size":-1}`}), 422, false)
	corrected := h.do(call{key: "k", path: path, body: `{"size":1}`})
	wantAnswer(t, corrected, 201, false)
	derived := h.wantRuns(path, 2)
	if derived[0] != derived[1] {
		t.Fatalf("derived keys %q, want one operation", derived)
	}
	h.wantWidgets(derived[1] + "#2")
	// The key now names the corrected request.
	wantAnswer(t, h.do(call{key: "k", path: path, body: `{"size":1}`}), 201, true)
	wantProblem(t, h.do(call{key: "k", path: path + "?status=422", body: `{"size":-1}`}), problem.KeyReused)
}

// A released key takes a corrected body, but not another target: retried
// against another widget (another order to pay), it would carry the first
// operation's derived key, and the provider's first answer, to the wrong
// resource.
func TestReleasedKeyKeepsItsTarget(t *testing.T) {
	h := newHarness(t)
	wantAnswer(t, h.do(call{key: "k", path: "/widgets/1?status=502", body: `{}`}), 502, false)
	wantProblem(t, h.do(call{key: "k", path: "/widgets/2", body: `{}`}), problem.KeyReused)
	wantAnswer(t, h.do(call{key: "k", path: "/widgets/1", body: `{"corrected":true}`}), 201, false)
	h.wantRuns("/widgets/1", 2)
	h.wantRuns("/widgets/2", 0)
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

// An attempt that outlives its lease is taken over by a retry, and its own
// completion is fenced off by the owner token: its writes roll back and
// its client gets 409, whether the retry has finished by then or not.
func TestLeaseTakeoverFencesTheLateAttempt(t *testing.T) {
	tests := []struct {
		name string
		// bBlocks: B is still running (blocked in its handler) when A
		// finishes, so only the owner token, not the state, fences A.
		bBlocks bool
	}{
		{"B finished before A", false},
		{"A finishes while B runs", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The attempts block before they open their transaction: on
			// SQLite an open write transaction would hold the other up for
			// the busy timeout.
			// The gate is made after the harness: its cleanup, which lets the
			// handlers go, then runs before the server's, which waits for them.
			var g *gate
			h := newHarness(t, withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }}))
			g = newGate(t, 1)
			if tt.bBlocks {
				g = newGate(t, 1, 2)
			}
			c := call{key: "k", body: `{"n":1}`}

			aDone := h.async(c)
			testkit.Recv(t, g.entered, "attempt A in the handler")
			h.clock.Advance(2 * time.Minute) // past A's one-minute lease
			bDone := h.async(c)
			var b answer
			if tt.bBlocks {
				testkit.Recv(t, g.entered, "attempt B in the handler")
			} else {
				b = testkit.Recv(t, bDone, "attempt B's answer")
			}

			g.release(1)
			a := testkit.Recv(t, aDone, "attempt A's answer")
			wantProblem(t, a, problem.KeyLeaseLost)
			if a.header.Get("Retry-After") != "1" || a.header.Get("Location") != "" {
				t.Fatalf("A's answer headers %v, want Retry-After and none of the handler's", a.header)
			}
			if tt.bBlocks {
				h.wantKeys("alice/k=in_progress")
				h.wantWidgets()
				g.release(2)
			}
			if tt.bBlocks {
				b = testkit.Recv(t, bDone, "attempt B's answer")
			}
			wantAnswer(t, b, http.StatusCreated, false)
			if b.run() != 2 {
				t.Fatalf("B answered %s, want the handler's second run", b.body)
			}

			derived := h.wantRuns("/widgets/1", 2)
			if derived[0] != derived[1] {
				t.Fatalf("derived keys %q: the takeover must keep the operation", derived)
			}
			h.wantWidgets(derived[1] + "#2") // A's row rolled back
			k, _ := h.key("alice", "k")
			if k.State != models.KeyCompleted || k.Status != http.StatusCreated || string(k.Body) != b.body {
				t.Fatalf("key = %+v, want completed with B's answer %s", k, b.body)
			}
			third := h.do(c)
			wantAnswer(t, third, http.StatusCreated, true)
			if third.body != b.body {
				t.Fatalf("third request got %s, want B's answer %s", third.body, b.body)
			}
			h.wantRuns("/widgets/1", 2)
		})
	}
}

func TestDuplicateGivesUpAfterWait(t *testing.T) {
	var g *gate
	h := newHarness(t, withWait(100*time.Millisecond), withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }}))
	g = newGate(t, 1)
	c := call{key: "k", body: `{}`}

	aDone := h.async(c)
	testkit.Recv(t, g.entered, "the original in the handler")
	b := h.do(c)
	wantProblem(t, b, problem.KeyInProgress)
	if b.header.Get("Retry-After") != "1" {
		t.Fatalf("409 without Retry-After: %v", b.header)
	}
	h.wantRuns("/widgets/1", 1)

	g.release(1)
	a := testkit.Recv(t, aDone, "the original's answer")
	wantAnswer(t, a, http.StatusCreated, false)
	retry := h.do(c)
	wantAnswer(t, retry, http.StatusCreated, true)
	if retry.body != a.body {
		t.Fatalf("retry got %s, want the original's %s", retry.body, a.body)
	}
	derived := h.wantRuns("/widgets/1", 1)
	h.wantWidgets(derived[0] + "#1")
}

// A duplicate that arrives while the original runs waits for it. To know
// the duplicate is waiting before the original is let go, the test's query
// callback reports (on h.probe) when the duplicate has read the key and
// found it in progress.
func TestDuplicateWaitsForTheOriginal(t *testing.T) {
	tests := []struct {
		name     string
		original int // the status the original answers
		replayed bool
	}{
		{"original stored: replayed", http.StatusCreated, true},
		{"original released: the waiter runs", http.StatusBadGateway, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g *gate
			h := newHarness(t, withHooks(hooks{before: func(c *gin.Context, run int) { g.block(c, run) }, after: func(c *gin.Context, run int) {
				if run == 1 {
					c.Set(statusKey, tt.original)
				}
			}}))
			g = newGate(t, 1)
			a, b := h.duplicateWhileRunning(g, call{key: "k", body: `{}`})
			wantAnswer(t, a, tt.original, false)
			wantAnswer(t, b, http.StatusCreated, tt.replayed)
			k, _ := h.key("alice", "k")
			if k.State != models.KeyCompleted || string(k.Body) != b.body {
				t.Fatalf("key = %+v, want completed with %s", k, b.body)
			}
			if tt.replayed {
				if b.body != a.body {
					t.Fatalf("duplicate got %s, want the original's %s", b.body, a.body)
				}
				derived := h.wantRuns("/widgets/1", 1)
				h.wantWidgets(derived[0] + "#1")
				return
			}
			derived := h.wantRuns("/widgets/1", 2)
			if b.run() != 2 || derived[0] != derived[1] {
				t.Fatalf("duplicate answered %s with derived keys %q, want the second run of the same operation", b.body, derived)
			}
			h.wantWidgets(derived[1] + "#2")
		})
	}
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

func TestExpiredKeyIsANewOperation(t *testing.T) {
	h := newHarness(t)
	c := call{key: "k", body: `{}`}
	first := h.do(c)
	wantAnswer(t, first, http.StatusCreated, false)

	h.clock.Advance(time.Hour) // the TTL: expired at exactly its expiry
	second := h.do(c)
	wantAnswer(t, second, http.StatusCreated, false)
	derived := h.wantRuns("/widgets/1", 2)
	if derived[0] == derived[1] {
		t.Fatalf("derived key %s reused by a new operation", derived[0])
	}
	wantAnswer(t, h.do(c), http.StatusCreated, true)
	h.wantWidgets(derived[0]+"#1", derived[1]+"#2")
	h.wantKeys("alice/k=completed")
}

func TestSweep(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	rows := []struct {
		scope, key, state, owner string
		expires, lockedUntil     time.Duration // from now
		deleted                  bool
	}{
		{"alice", "done-expired", models.KeyCompleted, "o", -time.Second, time.Hour, true},
		{"alice", "done-at-expiry", models.KeyCompleted, "o", 0, -time.Hour, true},
		{"bob", "done-expired", models.KeyCompleted, "o", -time.Hour, -2 * time.Hour, true},
		{"alice", "done-fresh", models.KeyCompleted, "o", time.Second, -time.Hour, false},
		{"alice", "stalled-expired", models.KeyInProgress, "o", -time.Minute, -time.Second, true},
		{"alice", "lease-ends-now-expired", models.KeyInProgress, "o", -time.Minute, 0, true},
		{"alice", "released-expired", models.KeyInProgress, "", -time.Second, -2 * time.Hour, true},
		{"alice", "running-expired", models.KeyInProgress, "o", -time.Minute, time.Minute, false},
		{"alice", "stalled-fresh", models.KeyInProgress, "o", time.Hour, -time.Minute, false},
		{"alice", "released-fresh", models.KeyInProgress, "", time.Hour, -time.Minute, false},
	}
	var want []string
	for _, r := range rows {
		k := models.IdempotencyKey{
			Scope: r.scope, Key: r.key, OperationID: "op-" + r.key, Method: "POST", Route: "/widgets/:id",
			Fingerprint: "f", State: r.state, OwnerToken: r.owner, LockedUntil: now.Add(r.lockedUntil),
			CreatedAt: now.Add(r.expires - time.Hour), ExpiresAt: now.Add(r.expires),
		}
		if err := h.db.Create(&k).Error; err != nil {
			t.Fatal(err)
		}
		if !r.deleted {
			state := r.state
			if k.Released() {
				state = "released"
			}
			want = append(want, r.scope+"/"+r.key+"="+state)
		}
	}
	slices.Sort(want)

	n, err := h.mw.Sweep(context.Background(), 2)
	if err != nil || n != 6 {
		t.Fatalf("Sweep = %d, %v; want 6 deleted", n, err)
	}
	h.wantKeys(want...)
	if n, err := h.mw.Sweep(context.Background(), 2); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want nothing left to delete", n, err)
	}
}

// zeros is an endless body of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestBodyTooLarge(t *testing.T) {
	h := newHarness(t)
	over := strings.Repeat("a", MaxBodyBytes+1)
	overForm := "idempotency_key=form&x=" + strings.Repeat("a", MaxBodyBytes)
	tests := []struct {
		name    string
		call    call
		problem problem.Type
	}{
		{"Content-Length over", call{key: "length", contentType: "text/plain", body: over}, problem.TooLarge},
		{"chunked over", call{key: "chunked", contentType: "text/plain", bodyReader: io.LimitReader(zeros{}, MaxBodyBytes+1)}, problem.TooLarge},
		{"endless chunked", call{key: "endless", contentType: "text/plain", bodyReader: io.LimitReader(zeros{}, 4*MaxBodyBytes)}, problem.TooLarge},
		{"form over", call{contentType: "application/x-www-form-urlencoded", body: overForm}, problem.TooLarge},
		// Authentication, then the key, then the body size.
		{"no user", call{user: "-", key: "anonymous", contentType: "text/plain", body: over}, problem.Unauthorized},
		{"invalid key", call{key: `"bad`, contentType: "text/plain", body: over}, problem.KeyInvalid},
		{"no key", call{contentType: "text/plain", body: over}, problem.KeyMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, h.do(tt.call), tt.problem)
			h.wantKeys()
		})
	}
	t.Run("Content-Length over, body never sent", func(t *testing.T) {
		// Refused on the declared length alone: the server must answer
		// without waiting for a body that does not come.
		a := h.raw(fmt.Sprintf("POST /widgets/1 HTTP/1.1\r\nHost: test\r\nX-Test-User: alice\r\nIdempotency-Key: declared\r\n"+
			"Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n", MaxBodyBytes+1), false)
		wantProblem(t, a, problem.TooLarge)
		h.wantKeys()
	})
	h.wantRuns("/widgets/1", 0)

	limit := h.do(call{key: "limit", contentType: "text/plain", bodyReader: io.LimitReader(zeros{}, MaxBodyBytes)})
	wantAnswer(t, limit, http.StatusCreated, false)
	h.wantKeys("alice/limit=completed")
}

// A body cut short is a malformed request, not a large one, and claims
// nothing.
func TestBodyCutShort(t *testing.T) {
	h := newHarness(t)
	a := h.raw("POST /widgets/1 HTTP/1.1\r\nHost: test\r\nX-Test-User: alice\r\nIdempotency-Key: short\r\n"+
		"Content-Type: text/plain\r\nContent-Length: 100\r\n\r\nonly ten b", true)
	wantProblem(t, a, problem.MalformedRequest)
	h.wantKeys()
	h.wantRuns("/widgets/1", 0)
}

// wantStep checks one answer of a sequence, and how often the handler has
// run so far.
func (h *harness) wantStep(name string, a answer, status int, p *problem.Type, replayed bool, runs int) {
	h.t.Helper()
	if p != nil {
		wantProblem(h.t, a, *p)
	}
	if a.status != status || a.replayed() != replayed {
		h.t.Fatalf("%s: answer %d (replayed %v) %s, want %d (replayed %v)", name, a.status, a.replayed(), a.body, status, replayed)
	}
	if got := len(h.runs.of("/widgets/1")); got != runs {
		h.t.Fatalf("%s: handler ran %d times, want %d", name, got, runs)
	}
}

// raw sends a hand-written request over TCP and reads the answer; with
// hangUp the client stops sending after it, as if the connection broke.
func (h *harness) raw(request string, hangUp bool) answer {
	h.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		h.t.Fatal(err)
	}
	if _, err := io.WriteString(conn, request); err != nil {
		h.t.Fatal(err)
	}
	if hangUp {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			h.t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		h.t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}
