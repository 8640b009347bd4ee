package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/shop/shop/middleware"
)

// note is the business row of the examples.
type note struct {
	ID   uint   `json:"id"`
	Text string `json:"text"`
}

// Mount the middleware after authentication, in front of each write that
// must happen once, on a database holding its table (IdempotencyKey). A retry with
// the same key gets the first answer, replayed, and writes nothing.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	db, err := gorm.Open(sqlite.Open(filepath.Join(dir, "app.db")), &gorm.Config{})
	if err == nil {
		err = errors.Join(db.AutoMigrate(middleware.Tables()...), db.AutoMigrate(&note{}))
	}
	if err != nil {
		panic(err)
	}
	mw := middleware.New(middleware.Config{
		DB: db, TTL: 24 * time.Hour, Lease: 30 * time.Second, Wait: 5 * time.Second,
		// Who owns the keys: the authenticated user.
		Scope: func(c *gin.Context) string { return c.GetHeader("X-User") },
	})
	defer mw.Close(context.Background())
	r := gin.New()
	r.POST("/notes", mw.Require(), func(c *gin.Context) {
		n := note{Text: "hello"}
		if err := middleware.Tx(c).Create(&n).Error; err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		c.JSON(http.StatusCreated, n)
	})

	for range 2 {
		w := post(r, "note-1", `{"text":"hello"}`)
		fmt.Println(w.Code, "replayed:", w.Header().Get(middleware.ReplayedHeader) == "true", w.Body.String())
	}
	fmt.Println("notes:", count(db))
	// Output:
	// 201 replayed: false {"id":1,"text":"hello"}
	// 201 replayed: true {"id":1,"text":"hello"}
	// notes: 1
}

// Write through Tx, and never commit it yourself: the middleware commits
// it with the stored answer, or rolls it back. Here the first request
// fails after writing, so its write is rolled back and its key released;
// the corrected retry, with the same key, runs again.
func ExampleTx() {
	db, done := exampleDB()
	defer done()
	r, mw := exampleRouter(db, func(c *gin.Context) {
		var n note
		if err := c.ShouldBindJSON(&n); err != nil {
			c.AbortWithStatus(http.StatusBadRequest)
			return
		}
		if err := middleware.Tx(c).Create(&n).Error; err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		if n.Text == "" {
			c.JSON(http.StatusUnprocessableEntity, gin.H{"error": "text is empty"})
			return
		}
		c.JSON(http.StatusCreated, n)
	})
	defer mw.Close(context.Background())

	fmt.Println(post(r, "note-1", `{"text":""}`).Code, "notes:", count(db))
	fmt.Println(post(r, "note-1", `{"text":"hello"}`).Code, "notes:", count(db))
	// Output:
	// 422 notes: 0
	// 201 notes: 1
}

// Call out before the first use of Tx, passing DerivedKey: every attempt
// of one operation passes the same key, so the provider does the work once
// however often the request is retried.
func ExampleDerivedKey() {
	db, done := exampleDB()
	defer done()
	var seen []string
	provider := func(key string) error {
		seen = append(seen, key)
		if len(seen) == 1 {
			return errors.New("timed out") // it may have charged
		}
		return nil
	}
	r, mw := exampleRouter(db, func(c *gin.Context) {
		if err := provider(middleware.DerivedKey(c)); err != nil {
			c.AbortWithStatus(http.StatusBadGateway) // not kept: the key is released
			return
		}
		n := note{Text: "paid"}
		if err := middleware.Tx(c).Create(&n).Error; err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		c.JSON(http.StatusCreated, n)
	})
	defer mw.Close(context.Background())

	fmt.Println(post(r, "pay-1", `{}`).Code)
	fmt.Println(post(r, "pay-1", `{}`).Code)
	fmt.Println("the same key downstream:", seen[0] == seen[1], strings.HasPrefix(seen[0], "idem_"))
	// Output:
	// 502
	// 201
	// the same key downstream: true true
}

// A 4xx is released unless the handler declares it Final: execution began
// and the same request would always get it, such as a declined card. A
// final answer is stored and replayed like a success.
func ExampleFinal() {
	db, done := exampleDB()
	defer done()
	runs := 0
	r, mw := exampleRouter(db, func(c *gin.Context) {
		runs++
		middleware.Final(c)
		c.JSON(http.StatusPaymentRequired, gin.H{"error": "card declined"})
	})
	defer mw.Close(context.Background())

	for range 2 {
		w := post(r, "pay-1", `{}`)
		fmt.Println(w.Code, "replayed:", w.Header().Get(middleware.ReplayedHeader) == "true")
	}
	fmt.Println("runs:", runs)
	// Output:
	// 402 replayed: false
	// 402 replayed: true
	// runs: 1
}

// A bare app, with no renderer of its own, answers the middleware's
// refusals as problem+json: here a key reused for another body, and a
// request with no key at all.
func TestABareAppAnswersTheRefusalsAsProblems(t *testing.T) {
	db, done := exampleDB()
	defer done()
	r, mw := exampleRouter(db, func(c *gin.Context) { c.JSON(http.StatusCreated, gin.H{}) })
	defer mw.Close(context.Background())
	post(r, "note-1", `{"text":"hello"}`)
	noKey := httptest.NewRequest(http.MethodPost, "/notes", strings.NewReader(`{}`))
	noKey.Header.Set("X-User", "alice")
	missing := httptest.NewRecorder()
	r.ServeHTTP(missing, noKey)
	for _, c := range []struct {
		got  *httptest.ResponseRecorder
		want string
	}{
		{post(r, "note-1", `{"text":"bye"}`), `422 {"type":"idempotency-key-reused","title":"Idempotency key reused with a different request","status":422,"detail":"The key was first used for POST /notes with another body or query."}`},
		{missing, `400 {"type":"idempotency-key-missing","title":"Idempotency key required","status":400,"detail":"the Idempotency-Key header (or the idempotency_key form field) is missing"}`},
	} {
		if got := fmt.Sprint(c.got.Code, " ", c.got.Body.String()); got != c.want || c.got.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("answered %s (%s), want %s (application/problem+json)", got, c.got.Header().Get("Content-Type"), c.want)
		}
	}
}

func exampleRouter(db *gorm.DB, handler gin.HandlerFunc) (*gin.Engine, *middleware.Idempotency) {
	mw := middleware.New(middleware.Config{
		DB: db, TTL: 24 * time.Hour, Lease: 30 * time.Second, Wait: 5 * time.Second,
		Scope: func(c *gin.Context) string { return c.GetHeader("X-User") },
	})
	r := gin.New()
	r.POST("/notes", mw.Require(), handler)
	return r, mw
}

// post sends a JSON body as alice, with an idempotency key.
func post(h http.Handler, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/notes", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-User", "alice")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func count(db *gorm.DB) (n int64) {
	db.Model(&note{}).Count(&n)
	return n
}

// exampleDB is a fresh SQLite database with the key table and the notes.
func exampleDB() (*gorm.DB, func()) {
	dir, err := os.MkdirTemp("", "middleware-example")
	if err != nil {
		panic(err)
	}
	db, err := gorm.Open(sqlite.Open(filepath.Join(dir, "example.db")), &gorm.Config{})
	if err == nil {
		err = errors.Join(db.AutoMigrate(middleware.Tables()...), db.AutoMigrate(&note{}))
	}
	if err != nil {
		panic(err)
	}
	return db, func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
		os.RemoveAll(dir)
	}
}
