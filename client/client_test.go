package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	shopclient "github.com/shop/shop/clients/go"
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

// testPolicy retries quickly.
var testPolicy = Policy{MaxTries: 8, MaxElapsed: 10 * time.Second, Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond, TryTimeout: 2 * time.Second}

// serve starts a script of steps; what it returns with it makes a client of
// the script, under testPolicy unless opts say otherwise.
func serve(t *testing.T, steps ...func(http.ResponseWriter, *http.Request)) (*script, func(...Option) *shopclient.ClientWithResponses) {
	t.Helper()
	s := &script{steps: steps}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, func(opts ...Option) *shopclient.ClientWithResponses {
		c, err := New(srv.URL, "shp_test", append([]Option{WithPolicy(testPolicy)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

var (
	anOrder = shopclient.OrderInput{Items: []shopclient.OrderLine{{ProductId: "p1", Quantity: 2}}}
	aCard   = shopclient.PaymentInput{PaymentMethod: "pm_card_visa"}
)

func order(t *testing.T, c *shopclient.ClientWithResponses, key string) (*shopclient.CreateOrderResponse, error) {
	return c.CreateOrderWithResponse(t.Context(), &shopclient.CreateOrderParams{IdempotencyKey: key}, anOrder)
}

// A 500, a 502, a hang-up, a 503 and a slow answer, then the 201: one
// operation of six tries, every one with the same fresh key and the same
// body, the typed call's and a body that cannot be read twice alike.
func TestRetriesKeepTheKeyAndTheBody(t *testing.T) {
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	steps := []func(http.ResponseWriter, *http.Request){status(500), status(502), hangUp, status(503), slow, status(201, "Location", "/api/v1/orders/1")}
	policy := testPolicy
	policy.TryTimeout = 300 * time.Millisecond
	// Without reused connections, so that net/http does not retry the
	// hang-up itself (it does, for a request with an Idempotency-Key).
	plain := WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
	once := func(c *shopclient.ClientWithResponses) (*http.Response, error) {
		r, err := c.CreateOrderWithBodyWithResponse(t.Context(), &shopclient.CreateOrderParams{}, "application/json",
			io.MultiReader(strings.NewReader(`{"items":[{"product_id":"p1",`), strings.NewReader(`"quantity":2}]}`)))
		if err != nil {
			return nil, err
		}
		return r.HTTPResponse, nil
	}
	typed := func(c *shopclient.ClientWithResponses) (*http.Response, error) {
		r, err := order(t, c, "")
		if err != nil {
			return nil, err
		}
		return r.HTTPResponse, nil
	}
	for name, call := range map[string]func(*shopclient.ClientWithResponses) (*http.Response, error){"typed": typed, "read once": once} {
		t.Run(name, func(t *testing.T) {
			s, c := serve(t, steps...)
			resp, err := call(c(WithPolicy(policy), plain))
			if err != nil {
				t.Fatal(err)
			}
			tries := s.seen()
			if resp.StatusCode != http.StatusCreated || len(tries) != 6 || resp.Header.Get("Location") != "/api/v1/orders/1" {
				t.Fatalf("answer %d after %d tries, want 201 after 6", resp.StatusCode, len(tries))
			}
			for i, try := range tries {
				if try.key == "" || try.key != tries[0].key || try.body != `{"items":[{"product_id":"p1","quantity":2}]}` {
					t.Fatalf("try %d carried key %q and body %s; want the first try's key, %q, and the order", i+1, try.key, try.body, tries[0].key)
				}
			}
		})
	}
}

// Each operation gets its own key, a key given is used as it is, and a
// read gets none.
func TestOneKeyPerOperation(t *testing.T) {
	s, newClient := serve(t, status(503), status(201))
	c := newClient()
	_, errA := order(t, c, "")
	_, errB := order(t, c, "")
	_, errC := c.CreatePaymentWithResponse(t.Context(), "order-1", &shopclient.CreatePaymentParams{IdempotencyKey: "pay-order-1"}, aCard)
	_, errD := c.GetOrderWithResponse(t.Context(), "order-1")
	if err := errors.Join(errA, errB, errC, errD); err != nil {
		t.Fatal(err)
	}
	tries := s.seen()
	if len(tries) != 5 || tries[1].key == "" || tries[1].key != tries[0].key || tries[2].key == tries[1].key ||
		tries[3].key != "pay-order-1" || tries[4].key != "" {
		t.Fatalf("keys sent %v; want the first retried under its key, two fresh distinct keys, the given one, and none for a read", tries)
	}
}

// Final answers end the operation at the first try, whatever they say.
func TestFinalAnswersAreNotRetried(t *testing.T) {
	for _, code := range []int{200, 201, 303, 400, 401, 402, 404, 409, 422} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			s, c := serve(t, status(code), status(201))
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := order(t, c(WithHTTPClient(noRedirect)), "k")
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != code || len(s.seen()) != 1 {
				t.Fatalf("answer %d, server saw %d tries; want %d after one", resp.StatusCode(), len(s.seen()), code)
			}
		})
	}
}

// A 409 or 429 with Retry-After is retried no sooner than it says; a 409
// without it (an order already paid) is final, as above.
func TestRetryAfterIsHonoured(t *testing.T) {
	for _, code := range []int{http.StatusConflict, http.StatusTooManyRequests} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			s, c := serve(t, status(code, "Retry-After", "1"), status(201))
			resp, err := order(t, c(), "k")
			if err != nil {
				t.Fatal(err)
			}
			tries := s.seen()
			if resp.StatusCode() != http.StatusCreated || len(tries) != 2 {
				t.Fatalf("answer %d after %d tries; want 201 after 2", resp.StatusCode(), len(tries))
			}
			if gap := tries[1].at.Sub(tries[0].at); gap < time.Second {
				t.Fatalf("retried after %v; Retry-After asked for 1s", gap)
			}
		})
	}
}

// A stored answer sent again says so, in its header and to Replayed.
func TestReplayedIsExposed(t *testing.T) {
	_, c := serve(t, status(402, "Idempotent-Replayed", "true"))
	resp, err := c().CreatePaymentWithResponse(t.Context(), "order-1", &shopclient.CreatePaymentParams{}, aCard)
	if err != nil || !Replayed(resp.HTTPResponse) {
		t.Fatalf("replayed %v, error %v; want a replay", resp != nil && Replayed(resp.HTTPResponse), err)
	}
	_, c = serve(t, status(201))
	if resp, err := order(t, c(), "k"); err != nil || Replayed(resp.HTTPResponse) {
		t.Fatalf("an original answer reads as replayed (error %v)", err)
	}
}

// An outage longer than the policy ends in a GaveUpError that keeps the
// key and the last answer: the outcome is unknown, and the same key asks
// again later.
func TestRetriesAreBounded(t *testing.T) {
	s, c := serve(t, status(503))
	_, err := order(t, c(WithPolicy(Policy{MaxTries: 3, MaxElapsed: time.Minute, Initial: time.Millisecond, Max: time.Millisecond})), "k")
	var gaveUp *GaveUpError
	if !errors.As(err, &gaveUp) || gaveUp.Tries != 3 || gaveUp.Last == nil || gaveUp.Last.StatusCode != 503 || gaveUp.Key != "k" || len(s.seen()) != 3 {
		t.Fatalf("error %v after %d tries; want a GaveUpError after 3 with the last 503", err, len(s.seen()))
	}

	s, c = serve(t, hangUp)
	start := time.Now()
	_, err = order(t, c(WithPolicy(Policy{MaxElapsed: 300 * time.Millisecond, Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond})), "")
	if !errors.As(err, &gaveUp) || gaveUp.Last != nil || gaveUp.Key == "" || len(s.seen()) < 2 || s.seen()[0].key != gaveUp.Key {
		t.Fatalf("error %v after %d tries; want a GaveUpError with no answer and the key sent, after several", err, len(s.seen()))
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %v; the policy allows 300ms of retries", took)
	}

	ctx, cancel := context.WithCancel(t.Context())
	_, c = serve(t, func(w http.ResponseWriter, r *http.Request) { cancel(); status(503)(w, r) })
	if _, err = c().CreateOrderWithResponse(ctx, &shopclient.CreateOrderParams{IdempotencyKey: "k"}, anOrder); !errors.Is(err, context.Canceled) {
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
