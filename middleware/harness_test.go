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
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	if url := os.Getenv(crashChildEnv); url != "" {
		crashChild(url) // a process the test kills; it never returns
	}
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
	// refuse, when set, is the middleware's Config.Refuse.
	refuse func(*gin.Context, Refusal)
	// entered counts the business handler's starts, claimed or not.
	entered atomic.Int64
	// mode is the route's; two-phase unless withMode.
	mode Mode
	// first, when set, runs before anything else of each request.
	first gin.HandlerFunc
	// logs, when set, receives the middleware's log as text; else it is discarded.
	logs io.Writer
	// digestKey is the middleware's Config.DigestKey.
	digestKey []byte
	// extendHolds is the middleware's Config.ExtendHolds.
	extendHolds func(ctx context.Context, holder string, until time.Time) error
	// outcomes records what the middleware observed, in order.
	outcomes struct {
		sync.Mutex
		seen []Outcome
	}
}

type option func(*harness)

func withHooks(hk hooks) option             { return func(h *harness) { h.hooks = hk } }
func withWait(d time.Duration) option       { return func(h *harness) { h.wait = d } }
func withOnSend(f func(db *gorm.DB)) option { return func(h *harness) { h.onSend = f } }
func withLease(d time.Duration) option      { return func(h *harness) { h.lease = d } }
func withTimeout(d time.Duration) option    { return func(h *harness) { h.timeout = d } }
func withMode(m Mode) option                { return func(h *harness) { h.mode = m } }
func withFirst(f gin.HandlerFunc) option    { return func(h *harness) { h.first = f } }
func withLogs(w io.Writer) option           { return func(h *harness) { h.logs = w } }
func withDigestKey(k []byte) option         { return func(h *harness) { h.digestKey = k } }
func withExtendHolds(f func(ctx context.Context, holder string, until time.Time) error) option {
	return func(h *harness) { h.extendHolds = f }
}
func withRefuse(r func(*gin.Context, Refusal)) option {
	return func(h *harness) { h.refuse = r }
}

// registerProbe makes the key read tell a request sent with a probe channel
// (in its context under probeKey{}) when it found the key in progress: the
// request is then waiting for the original. The read scans its row by hand,
// so the probe looks at the key itself, just after: the tests hold the
// original in its handler meanwhile, so the key cannot move.
func registerProbe(db *gorm.DB) error {
	return db.Callback().Row().After("gorm:row").Register("test:probe", func(tx *gorm.DB) {
		probe, ok := tx.Statement.Context.Value(probeKey{}).(chan struct{})
		if ok && keyInProgress(tx) {
			select {
			case probe <- struct{}{}:
			default:
			}
		}
	})
}

// keyInProgress reports whether tx is the store's key read (find) and the
// key it read is in progress.
func keyInProgress(tx *gorm.DB) bool {
	if !strings.HasPrefix(tx.Statement.SQL.String(), "SELECT "+keyColumns) || len(tx.Statement.Vars) != 2 {
		return false
	}
	var states []string
	err := tx.Session(&gorm.Session{NewDB: true}).Raw(`SELECT state FROM idempotency_keys WHERE scope = ? AND "key" = ?`, tx.Statement.Vars...).Scan(&states).Error
	return err == nil && len(states) == 1 && states[0] == KeyInProgress
}

func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	db := testkit.NewDB(t)
	if err := db.AutoMigrate(append(Tables(), &widget{})...); err != nil {
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
	logger := slog.New(slog.DiscardHandler)
	if h.logs != nil {
		logger = slog.New(slog.NewTextHandler(h.logs, nil))
	}
	h.mw = New(Config{
		DB: db, TTL: time.Hour, Lease: h.lease, Wait: h.wait, Timeout: h.timeout, Now: h.now,
		Scope:  func(c *gin.Context) string { return c.GetString(userKey) },
		Refuse: h.refuse,
		Logger: logger, DigestKey: h.digestKey, ExtendHolds: h.extendHolds,
		Observe: func(_ string, o Outcome) {
			h.outcomes.Lock()
			defer h.outcomes.Unlock()
			h.outcomes.seen = append(h.outcomes.seen, o)
		},
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
	if h.first != nil {
		r.Use(h.first)
	}
	r.Use(h.observe, h.authenticate)
	require := h.mw.Require()
	if h.mode == Atomic {
		require = h.mw.RequireAtomic()
	}
	r.POST("/widgets/:id", require, h.handle)
	srv := httptest.NewServer(r)
	t.Cleanup(func() { closeServer(t, srv) })
	h.url = srv.URL
	return h
}

// serverCloseWait bounds how long a test's cleanup waits for its server's
// requests to end. The bound only turns a hang into a failure.
const serverCloseWait = 20 * time.Second

// closeServer closes srv, which waits for the requests it is still
// serving. A handler the test left blocked fails the test after
// serverCloseWait instead of hanging the package until its timeout.
func closeServer(t *testing.T, srv *httptest.Server) {
	closed := make(chan struct{})
	go func() { defer close(closed); srv.Close() }()
	select {
	case <-closed:
	case <-time.After(serverCloseWait):
		t.Errorf("the test server still had a request running %s after the test: a handler the test blocked was never let go", serverCloseWait)
	}
}

// observed is what the middleware observed so far, in order.
func (h *harness) observed() []Outcome {
	h.outcomes.Lock()
	defer h.outcomes.Unlock()
	return slices.Clone(h.outcomes.seen)
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
	base        string // another server's URL; the harness's when empty
}

// answer is a response, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) replayed() bool { return a.header.Get(ReplayedHeader) == "true" }

func (a answer) problemType() string {
	var p struct{ Type string }
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
	base := h.url
	if c.base != "" {
		base = c.base
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, body)
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
	var rows []IdempotencyKey
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

func (h *harness) key(scope, key string) (IdempotencyKey, bool) {
	h.t.Helper()
	k, ok, err := h.mw.store.find(context.Background(), scope, key)
	if err != nil {
		h.t.Fatal(err)
	}
	return k, ok
}

// storedReplays is the replays the database holds for a key, as a listing reads them.
func storedReplays(t *testing.T, db *gorm.DB, scope, key string) int {
	t.Helper()
	var n int
	err := db.Raw(`SELECT `+replaysTotal+` FROM idempotency_keys `+replayCounts+` WHERE scope = ? AND "key" = ?`, scope, key).Row().Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
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

func wantProblem(t *testing.T, a answer, typ Refusal) {
	t.Helper()
	retryAfter := ""
	if typ.RetryAfter > 0 {
		retryAfter = strconv.Itoa(typ.RetryAfter)
	}
	if a.status != typ.Status || a.problemType() != typ.Type || a.header.Get("Content-Type") != "application/problem+json" || a.header.Get("Retry-After") != retryAfter {
		t.Fatalf("answer %d %q %s (Retry-After %q), want a %d %s problem (Retry-After %q)", a.status, a.header.Get("Content-Type"), a.body, a.header.Get("Retry-After"), typ.Status, typ.Type, retryAfter)
	}
}

// gate blocks the handler's runs it was made for until each is released,
// and reports each run on entered when it got there. The end of the test
// opens it too, before any cleanup runs, so that a test that fails while a
// run waits here does not leave the server's cleanup waiting for ever,
// whether the gate was made before the harness or after it.
type gate struct {
	entered chan int
	open    map[int]chan struct{}
	once    map[int]*sync.Once
	ended   <-chan struct{} // the test's end
}

func newGate(t *testing.T, runs ...int) *gate {
	g := &gate{entered: make(chan int, len(runs)), open: map[int]chan struct{}{}, once: map[int]*sync.Once{}, ended: t.Context().Done()}
	for _, run := range runs {
		g.open[run], g.once[run] = make(chan struct{}), &sync.Once{}
	}
	return g
}

func (g *gate) release(run int) { g.once[run].Do(func() { close(g.open[run]) }) }

func (g *gate) block(_ *gin.Context, run int) {
	if open, ok := g.open[run]; ok {
		g.entered <- run
		select {
		case <-open:
		case <-g.ended:
		}
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

// wantStep checks one answer of a sequence, and how often the handler has
// run so far.
func (h *harness) wantStep(name string, a answer, status int, p *Refusal, replayed bool, runs int) {
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
