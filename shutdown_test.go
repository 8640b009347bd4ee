package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/config"
	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/middleware"
)

// A payment in flight when the shutdown begins still gets its 201, its key
// is recorded as completed before the database closes, and run returns nil.
// The logs are JSON (LOG_FORMAT=json), one line per request.
//
// The payment is held in flight without any clock: it is sent by hand with
// "Expect: 100-continue", and the server's "100 Continue" says the handler
// is reading its body. The body is sent only once the shutdown has begun —
// the listener refuses new connections — so the payment is claimed, charged
// and recorded while the server is shutting down.
func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "shop.db")
	env := map[string]string{"HOST": "127.0.0.1", "PORT": "0", "DATABASE_URL": dbPath, "LOG_FORMAT": "json"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out testkit.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, &out) }()
	base := serving(t, &out, done)

	const password = "correct horse battery"
	creds := fmt.Sprintf(`{"email":"shutdown@example.com","password":%q}`, password)
	post(t, base+"/api/v1/users", "", "", creds, http.StatusCreated)
	var token struct{ Token string }
	json.Unmarshal(post(t, base+"/api/v1/tokens", "", "", creds, http.StatusCreated), &token)
	var order struct{ ID string }
	body := fmt.Sprintf(`{"items":[{"product_id":%q,"quantity":1}]}`, productID(t, base))
	json.Unmarshal(post(t, base+"/api/v1/orders", token.Token, "order-1", body, http.StatusCreated), &order)

	db, err := database.Open(dbPath, database.Options{GroupCommit: config.Default().GroupCommit})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()

	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	payment := `{"payment_method":"pm_card_visa"}`
	fmt.Fprintf(conn, "POST /api/v1/orders/%s/payments HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Authorization: Bearer %s\r\nIdempotency-Key: pay-1\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		order.ID, addr, token.Token, len(payment))
	replies := bufio.NewReader(conn)
	if r, err := http.ReadResponse(replies, nil); err != nil || r.StatusCode != http.StatusContinue {
		t.Fatalf("want 100 Continue, the handler reading the payment's body: %v %v", r, err)
	}
	cancel()
	until(t, "the shutdown to close the listener", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if state := keyState(t, db, "pay-1"); state != "" {
		t.Fatalf("key pay-1 is %q before its body was sent", state)
	}
	io.WriteString(conn, payment)
	resp, err := http.ReadResponse(replies, nil)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("payment in flight during shutdown: %v %v, want 201", resp, err)
	}
	resp.Body.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after the shutdown")
	}
	if state := keyState(t, db, "pay-1"); state != middleware.KeyCompleted {
		t.Fatalf("key pay-1 is %q after the shutdown, want completed", state)
	}
	var payments, charges int64
	db.Table("payments").Where("status = ?", "succeeded").Count(&payments)
	db.Table("simulated_charges").Count(&charges)
	if payments != 1 || charges != 1 {
		t.Fatalf("%d payments, %d charges; want 1 each", payments, charges)
	}

	logs := out.String()
	for _, secret := range []string{token.Token, password, "pay-1"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the logs reveal %q:\n%s", secret, logs)
		}
	}
	sum := sha256.Sum256([]byte("pay-1"))
	var payLine map[string]any
	scanner := bufio.NewScanner(strings.NewReader(logs))
	for scanner.Scan() {
		var line map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatalf("LOG_FORMAT=json, but a line is not JSON: %s", scanner.Text())
		}
		if line["msg"] == "request" && line["idempotency_key"] == hex.EncodeToString(sum[:6]) {
			payLine = line
		}
	}
	if payLine == nil || payLine["route"] != "/api/v1/orders/:id/payments" || payLine["status"] != 201.0 ||
		payLine["replayed"] != false || payLine["user_id"] == nil || payLine["duration"] == nil {
		t.Fatalf("request line of the payment: %v\n%s", payLine, logs)
	}
}

// serving waits for run to say where it serves, and returns the base URL.
func serving(t *testing.T, out *testkit.Buffer, done <-chan error) string {
	t.Helper()
	var base string
	until(t, "the server to start", func() bool {
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, out.String())
		default:
		}
		for line := range strings.Lines(out.String()) {
			var v struct{ Msg, API string }
			if json.Unmarshal([]byte(line), &v) == nil && v.Msg == "shop is serving" {
				u, err := url.Parse(v.API)
				if err != nil {
					t.Fatal(err)
				}
				base = "http://127.0.0.1:" + u.Port()
				return true
			}
		}
		return false
	})
	return base
}

// until polls cond; the bound only turns a hang into a failure.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func keyState(t *testing.T, db *gorm.DB, key string) string {
	t.Helper()
	var states []string
	if err := db.Model(&middleware.IdempotencyKey{}).Where(`"key" = ?`, key).Pluck("state", &states).Error; err != nil {
		t.Fatal(err)
	}
	if len(states) == 0 {
		return ""
	}
	return states[0]
}

func post(t *testing.T, url, token, key, body string, want int) []byte {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, b, want)
	}
	return b
}

func productID(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/products")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var catalog struct{ Products []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&catalog); err != nil || len(catalog.Products) == 0 {
		t.Fatalf("catalog: %v %v", catalog, err)
	}
	return catalog.Products[0].ID
}
