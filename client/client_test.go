package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// script is a server that answers the n-th try with the n-th step and
// records what each try carried.
type script struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter, r *http.Request)
	tries []seen
}

type seen struct {
	key, body string
	at        time.Time
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.tries)
	s.tries = append(s.tries, seen{r.Header.Get("Idempotency-Key"), string(body), time.Now()})
	step := s.steps[min(n, len(s.steps)-1)]
	s.mu.Unlock()
	step(w, r)
}

func (s *script) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.tries...)
}

func status(code int, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}
}

// hangUp closes the connection without an answer: a lost reply.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func serve(t *testing.T, steps ...func(http.ResponseWriter, *http.Request)) (*Client, *script) {
	t.Helper()
	s := &script{steps: steps}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c := New(srv.URL, "shp_test")
	c.Policy = Policy{MaxTries: 8, MaxElapsed: 10 * time.Second, Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond, TryTimeout: 2 * time.Second}
	return c, s
}

// A 500, a 502, a hang-up, a 503 and a slow answer, then the 201: one
// operation of six tries, every one with the same key and the same body.
func TestRetriesKeepTheKeyAndTheBody(t *testing.T) {
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	c, s := serve(t, status(500), status(502), hangUp, status(503), slow, status(201, "Location", "/api/v1/orders/1"))
	c.Policy.TryTimeout = 300 * time.Millisecond
	// Without reused connections, so that net/http does not retry the
	// hang-up itself (it does, for a request with an Idempotency-Key).
	c.HTTP.Transport = &http.Transport{DisableKeepAlives: true}
	resp, err := c.CreateOrder(t.Context(), "", []Item{{ProductID: "p1", Quantity: 2}})
	if err != nil {
		t.Fatal(err)
	}
	tries := s.seen()
	if resp.Status != http.StatusCreated || resp.Tries != 6 || len(tries) != 6 || resp.Header.Get("Location") != "/api/v1/orders/1" {
		t.Fatalf("answer %d after %d tries (server saw %d), want 201 after 6", resp.Status, resp.Tries, len(tries))
	}
	for i, try := range tries {
		if try.key != `"`+resp.Key+`"` || try.body != `{"items":[{"product_id":"p1","quantity":2}]}` {
			t.Fatalf("try %d carried key %s and body %s; want %q and the first body", i+1, try.key, try.body, resp.Key)
		}
	}
}

// Each operation gets its own key, and a key given is used as it is.
func TestOneKeyPerOperation(t *testing.T) {
	c, s := serve(t, status(201))
	a, errA := c.Pay(t.Context(), "", "order-1", "pm_card_visa")
	b, errB := c.Pay(t.Context(), "", "order-1", "pm_card_visa")
	given, errC := c.Pay(t.Context(), "pay-order-1", "order-1", "pm_card_visa")
	if err := errors.Join(errA, errB, errC); err != nil {
		t.Fatal(err)
	}
	tries := s.seen()
	if a.Key == "" || a.Key == b.Key || given.Key != "pay-order-1" || tries[2].key != `"pay-order-1"` {
		t.Fatalf("keys %q, %q, %q (sent %v); want two fresh distinct keys and the given one", a.Key, b.Key, given.Key, tries)
	}
}

// Final answers end the operation at the first try, whatever they say.
func TestFinalAnswersAreNotRetried(t *testing.T) {
	for _, code := range []int{200, 201, 303, 400, 401, 402, 404, 409, 422} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			c, s := serve(t, status(code), status(201))
			c.HTTP.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, err := c.Do(t.Context(), http.MethodPost, "/api/v1/orders", "k", map[string]int{"n": 1})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != code || resp.Tries != 1 || len(s.seen()) != 1 {
				t.Fatalf("answer %d after %d tries, server saw %d; want %d after one", resp.Status, resp.Tries, len(s.seen()), code)
			}
		})
	}
}

// A 409 or 429 with Retry-After is retried no sooner than it says; a 409
// without it (an order already paid) is final, as above.
func TestRetryAfterIsHonoured(t *testing.T) {
	for _, code := range []int{http.StatusConflict, http.StatusTooManyRequests} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			c, s := serve(t, status(code, "Retry-After", "1"), status(201))
			resp, err := c.Do(t.Context(), http.MethodPost, "/api/v1/orders", "k", nil)
			if err != nil {
				t.Fatal(err)
			}
			tries := s.seen()
			if resp.Status != http.StatusCreated || len(tries) != 2 {
				t.Fatalf("answer %d after %d tries; want 201 after 2", resp.Status, len(tries))
			}
			if gap := tries[1].at.Sub(tries[0].at); gap < time.Second {
				t.Fatalf("retried after %v; Retry-After asked for 1s", gap)
			}
		})
	}
}

// A stored answer sent again says so.
func TestReplayedIsExposed(t *testing.T) {
	c, _ := serve(t, status(201, "Idempotent-Replayed", "true"))
	resp, err := c.Do(t.Context(), http.MethodPost, "/api/v1/orders", "k", nil)
	if err != nil || !resp.Replayed {
		t.Fatalf("replayed %v, error %v; want a replay", resp != nil && resp.Replayed, err)
	}
	c, _ = serve(t, status(201))
	if resp, err = c.Do(t.Context(), http.MethodPost, "/api/v1/orders", "k", nil); err != nil || resp.Replayed {
		t.Fatalf("an original answer reads as replayed (error %v)", err)
	}
}

// An outage longer than the policy ends in a GaveUpError that keeps the
// key and the last answer: the outcome is unknown, and the same key asks
// again later.
func TestRetriesAreBounded(t *testing.T) {
	c, s := serve(t, status(503))
	c.Policy.MaxTries = 3
	_, err := c.Do(t.Context(), http.MethodPost, "/api/v1/orders", "k", nil)
	var gaveUp *GaveUpError
	if !errors.As(err, &gaveUp) || gaveUp.Tries != 3 || gaveUp.Last == nil || gaveUp.Last.Status != 503 || gaveUp.Key != "k" || len(s.seen()) != 3 {
		t.Fatalf("error %v after %d tries; want a GaveUpError after 3 with the last 503", err, len(s.seen()))
	}

	c, s = serve(t, hangUp)
	c.Policy.MaxTries, c.Policy.MaxElapsed = 0, 300*time.Millisecond
	start := time.Now()
	_, err = c.Do(t.Context(), http.MethodPost, "/api/v1/orders", "k", nil)
	if !errors.As(err, &gaveUp) || gaveUp.Last != nil || len(s.seen()) < 2 {
		t.Fatalf("error %v after %d tries; want a GaveUpError with no answer, after several", err, len(s.seen()))
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %v; the policy allows 300ms of retries", took)
	}

	ctx, cancel := context.WithCancel(t.Context())
	c, _ = serve(t, func(w http.ResponseWriter, r *http.Request) { cancel(); status(503)(w, r) })
	if _, err = c.Do(ctx, http.MethodPost, "/api/v1/orders", "k", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want the context's", err)
	}
}

// The n-th wait is drawn from [0, min(Max, Initial·2ⁿ)], and the draws differ.
func TestBackoffIsCappedWithFullJitter(t *testing.T) {
	j := newFullJitter(Policy{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond})
	ceilings := []time.Duration{10, 20, 40, 80, 80, 80}
	for round := range 50 {
		j.Reset()
		for i, ceiling := range ceilings {
			if d := j.NextBackOff(); d < 0 || d > ceiling*time.Millisecond {
				t.Fatalf("round %d, wait %d: %v, want within [0, %dms]", round, i, d, ceiling)
			}
		}
	}
	distinct := map[time.Duration]bool{}
	for range 20 {
		j.Reset()
		distinct[j.NextBackOff()] = true
	}
	if len(distinct) < 5 {
		t.Fatalf("20 first waits took %d values; want them spread", len(distinct))
	}
}
