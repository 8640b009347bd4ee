package middleware

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
)

// The benchmarks drive the middleware in process (no network) over a real
// database: SQLite, or PostgreSQL when TEST_DATABASE_URL is set. The
// handler writes one widget through Tx, the smallest business write.

// benchSetup is the middleware in front of the widget handler, and the same
// handler behind txOnly, on one database.
type benchSetup struct {
	db       *gorm.DB
	mw       *Idempotency
	once, tx http.Handler
	atomic   http.Handler // the handler behind RequireAtomic
	canned   http.Handler // a stored answer's bytes, with no middleware: the floor of a replay
	// A request sent with X-Hold signals entered from inside the handler,
	// then waits for release.
	entered, release chan struct{}
}

func newBenchSetup(b *testing.B, wait time.Duration, opts ...func(*Config)) *benchSetup {
	b.Helper()
	db := testkit.NewDB(b)
	if err := db.AutoMigrate(append(Tables(), &widget{})...); err != nil {
		b.Fatal(err)
	}
	err := registerProbe(db)
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{
		DB: db, TTL: time.Hour, Lease: time.Minute, Wait: wait,
		Scope:  func(c *gin.Context) string { return "alice" },
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	mw := New(cfg)
	b.Cleanup(func() { _ = mw.Close(context.Background()) })
	s := &benchSetup{db: db, mw: mw, entered: make(chan struct{}), release: make(chan struct{})}
	handler := func(c *gin.Context) {
		if c.GetHeader("X-Hold") != "" {
			s.entered <- struct{}{}
			<-s.release
		}
		if err := Tx(c).Create(&widget{Ref: DerivedKey(c)}).Error; err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		c.Header("Location", "/widgets/1")
		c.JSON(http.StatusCreated, gin.H{"id": 1, "name": "bolt", "size": 1})
	}
	once, atomic, tx, canned := gin.New(), gin.New(), gin.New(), gin.New()
	once.POST("/widgets/:id", mw.Require(), handler)
	atomic.POST("/widgets/:id", mw.RequireAtomic(), handler)
	tx.POST("/widgets/:id", txOnly(db), handler)
	canned.POST("/widgets/:id", func(c *gin.Context) {
		_, _ = io.Copy(io.Discard, c.Request.Body)
		c.Header("Location", "/widgets/1")
		c.Data(http.StatusCreated, "application/json; charset=utf-8", cannedAnswer)
	})
	s.once, s.atomic, s.tx, s.canned = once, atomic, tx, canned
	return s
}

const benchBody = `{"name":"bolt","size":1}`

// cannedAnswer is the handler's answer, as a replay sends it.
var cannedAnswer = []byte(`{"id":1,"name":"bolt","size":1}`)

func benchServe(b *testing.B, h http.Handler, ctx context.Context, key, body string, want int, header ...string) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/widgets/1", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != want {
		b.Fatalf("status %d, want %d: %s", w.Code, want, w.Body)
	}
}

// BenchmarkFresh: a new key each time — find, claim, the handler's
// transaction with the completion, commit.
func BenchmarkFresh(b *testing.B) {
	s := newBenchSetup(b, time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		benchServe(b, s.once, context.Background(), "fresh-"+strconv.Itoa(i), benchBody, http.StatusCreated)
	}
}

// BenchmarkFreshAtomic: a new key each time, in atomic mode — find, then
// one transaction with the claim, the write and the completion.
func BenchmarkFreshAtomic(b *testing.B) {
	s := newBenchSetup(b, time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		benchServe(b, s.atomic, context.Background(), "fresh-"+strconv.Itoa(i), benchBody, http.StatusCreated)
	}
}

// txOnly runs the handler the way it would run without idempotency: no key,
// no claim, no stored answer, only the transaction Tx hands out, committed
// when the answer is a success and then sent: the baseline of
// BenchmarkWithoutMiddleware, what the middleware costs on top of the same
// handler.
func txOnly(db *gorm.DB) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := context.WithoutCancel(c.Request.Context())
		c.Request = c.Request.WithContext(ctx)
		op := &operation{key: IdempotencyKey{OperationID: uuid.NewString(), Route: c.FullPath()}, db: db.WithContext(ctx), stopHeartbeat: func() {}}
		c.Set(operationKey, op)
		real := c.Writer
		rec := newRecorder(real)
		c.Writer = rec
		defer func() {
			c.Writer = real
			if p := recover(); p != nil {
				op.rollback()
				panic(p)
			}
		}()
		c.Next()
		c.Writer = real
		if rec.status >= 400 && !op.final {
			op.rollback()
		} else if op.tx != nil {
			if err := op.tx.Commit().Error; err != nil {
				c.AbortWithStatus(500)
				return
			}
		}
		send(c.Writer, rec.header, "", rec.status, rec.body.Bytes())
	}
}

// BenchmarkWithoutMiddleware: the same handler and write, in a plain
// transaction: what BenchmarkFresh costs without idempotency.
func BenchmarkWithoutMiddleware(b *testing.B) {
	s := newBenchSetup(b, time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		benchServe(b, s.tx, context.Background(), "", benchBody, http.StatusCreated)
	}
}

// BenchmarkReplay: a completed key this instance has seen — the stored
// answer, from memory.
func BenchmarkReplay(b *testing.B) {
	s := newBenchSetup(b, time.Second)
	benchServe(b, s.once, context.Background(), "k", benchBody, http.StatusCreated)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		benchServe(b, s.once, context.Background(), "k", benchBody, http.StatusCreated)
	}
}

// BenchmarkReplayUncached: a completed key with the cache off — one
// indexed read, the stored answer: what a replay costs an instance that has
// not seen the key.
func BenchmarkReplayUncached(b *testing.B) {
	s := newBenchSetup(b, time.Second, func(c *Config) { c.CacheBytes = -1 })
	benchServe(b, s.once, context.Background(), "k", benchBody, http.StatusCreated)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		benchServe(b, s.once, context.Background(), "k", benchBody, http.StatusCreated)
	}
}

// BenchmarkCannedAnswer: the same request and answer with no middleware and
// no database — what the benchmark's own request, recorder and Gin cost,
// to subtract from BenchmarkReplay.
func BenchmarkCannedAnswer(b *testing.B) {
	s := newBenchSetup(b, time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		benchServe(b, s.canned, context.Background(), "k", benchBody, http.StatusCreated)
	}
}

// BenchmarkMismatch: a completed key sent with another body — 422.
func BenchmarkMismatch(b *testing.B) {
	s := newBenchSetup(b, time.Second)
	benchServe(b, s.once, context.Background(), "k", benchBody, http.StatusCreated)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		benchServe(b, s.once, context.Background(), "k", `{"name":"nut","size":2}`, http.StatusUnprocessableEntity)
	}
}

// BenchmarkInProgressWait: a duplicate finds its key in progress, and the
// original completes while it waits; the duplicate then replays. When the
// original runs in the same instance, its end wakes the duplicate; when it
// runs elsewhere (here: completed straight in the database), the duplicate
// finds out at its next poll, 5 ms after the first look.
func BenchmarkInProgressWait(b *testing.B) {
	b.Run("same-instance", benchWaitSameInstance)
	b.Run("other-instance", benchWaitOtherInstance)
}

func benchWaitSameInstance(b *testing.B) {
	s := newBenchSetup(b, 5*time.Second)
	probe := make(chan struct{}, 1)
	ctx := context.WithValue(context.Background(), probeKey{}, probe)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := "wait-" + strconv.Itoa(i)
		original, duplicate := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(original)
			benchServe(b, s.once, context.Background(), k, benchBody, http.StatusCreated, "X-Hold", "1")
		}()
		<-s.entered
		go func() {
			defer close(duplicate)
			benchServe(b, s.once, ctx, k, benchBody, http.StatusCreated)
		}()
		<-probe
		s.release <- struct{}{}
		<-original
		<-duplicate
	}
}

func benchWaitOtherInstance(b *testing.B) {
	s := newBenchSetup(b, 5*time.Second)
	probe := make(chan struct{}, 1)
	ctx := context.WithValue(context.Background(), probeKey{}, probe)
	now := time.Now().UTC().Truncate(time.Microsecond)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := IdempotencyKey{
			Scope: "alice", Key: "wait-" + strconv.Itoa(i), OperationID: "op", Method: http.MethodPost, Route: "/widgets/:id",
			OwnerToken: "original", State: KeyInProgress, CreatedAt: now, LockedUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour),
		}
		fp, err := fingerprintOf(request{Method: http.MethodPost, Route: "/widgets/:id", Params: gin.Params{{Key: "id", Value: "1"}}, ContentType: "application/json", Body: []byte(benchBody)})
		if err != nil {
			b.Fatal(err)
		}
		k.Fingerprint = fp
		if id, err := s.mw.store.claim(context.Background(), k); err != nil || id == 0 {
			b.Fatalf("claim: %v %v", id, err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			benchServe(b, s.once, ctx, k.Key, benchBody, http.StatusCreated)
		}()
		<-probe
		resp := storedResponse{Status: http.StatusCreated, Headers: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{}`)}
		if ok, err := s.mw.store.on(s.db).complete(k, resp); err != nil || !ok {
			b.Fatalf("complete: %v %v", ok, err)
		}
		<-done
	}
}

// jsonBody is a JSON object of about size bytes, keys out of order so that
// canonicalisation has work to do.
func jsonBody(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	for i := 0; sb.Len() < size-40; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"quantity":%d,"product_id":"p-%08d"}`, i%100+1, i)
	}
	sb.WriteString(`],"note":"x"}`)
	return []byte(sb.String())
}

func BenchmarkFingerprint(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		body := jsonBody(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			r := request{Method: http.MethodPost, Route: "/api/v1/orders", ContentType: "application/json", Body: body}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fingerprintOf(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCacheEntryMemory fills a replay cache with 10,000 answers shaped
// like an order's (a 512-byte JSON body, Content-Type and Location, UUID
// key, scope and operation) and reports what one entry costs: the live heap
// it adds, after a collection, and the weight the cache bounds.
func BenchmarkCacheEntryMemory(b *testing.B) {
	const n = 10000
	body := []byte(`{"id":"` + strings.Repeat("x", 512-9) + `"}`)
	var heap, weighed float64
	for b.Loop() {
		before := liveHeap()
		a := newAnswers(1<<30, time.Now)
		for i := range n {
			k := scopedKey{fmt.Sprintf("%036d", i), fmt.Sprintf("k%035d", i)}
			a.put(&cached{
				scopedKey: k, replayOf: replayOf{uint(i + 1), fmt.Sprintf("o%035d", i)}, method: "POST", route: "/api/v1/orders",
				fingerprint: strings.Repeat("f", 64), expiresAt: time.Now().Add(time.Hour), status: http.StatusCreated,
				headers: http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Location": {"/api/v1/orders/" + k.key}},
				body:    bytes.Clone(body),
			})
		}
		a.c.CleanUp()
		heap = float64(liveHeap()-before) / n
		weighed = float64(a.c.WeightedSize()) / n
		runtime.KeepAlive(a)
	}
	b.ReportMetric(heap, "heap-B/entry")
	b.ReportMetric(weighed, "weighed-B/entry")
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
