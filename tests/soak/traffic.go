package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	refclient "github.com/shop/shop/client"
	shopclient "github.com/shop/shop/clients/go"
)

// traffic is the clients, and what their answers promised.
type traffic struct {
	f        *fleet
	products []string
	// stock is each product's units at the start, which the audit holds
	// the end to (testkit.AuditStock).
	stock    map[string]int
	api      []*shopclient.ClientWithResponses
	shoppers []*shopper

	mu       sync.Mutex
	answers  map[string]int  // "api pay 201" → how many
	replays  int             // answers marked Idempotent-Replayed
	created  map[string]bool // orders an answer said were made
	paid     map[string]bool // orders an answer said were paid
	pending  []func(context.Context) bool
	breaches []string // answers the contract forbids
}

// host is the name every client uses; the transport picks an instance.
const host = "shop.test"

// transport dials a random live instance for each connection, and keeps
// none open, so requests spread over both and a restart is a new dial.
func (f *fleet) transport() *http.Transport {
	return &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return f.dial(ctx, network, rand.IntN(2))
	}}
}

// plentiful is the fewest units of a product the traffic buys.
const plentiful = 1000

func newTraffic(f *fleet, cfg config) (*traffic, error) {
	t := &traffic{f: f, answers: map[string]int{}, created: map[string]bool{}, paid: map[string]bool{}}
	plain := &http.Client{Transport: f.transport(), Timeout: 30 * time.Second}
	var catalog struct {
		Products []struct {
			ID    string
			Stock int
		}
	}
	if err := getJSON(plain, "/api/v1/products", &catalog); err != nil {
		return nil, fmt.Errorf("catalog: %v", err)
	}
	t.stock = map[string]int{}
	for _, p := range catalog.Products {
		t.stock[p.ID] = p.Stock
		// Only what cannot run out in a run: every answer the traffic
		// checks is then one of an order placed. Selling the last units
		// is TestLastUnitsAreSoldOnce's.
		if p.Stock >= plentiful {
			t.products = append(t.products, p.ID)
		}
	}
	if len(t.products) == 0 {
		return nil, fmt.Errorf("catalog: no product with %d units or more", plentiful)
	}
	for i := range cfg.apiClients {
		token, err := apiUser(plain, fmt.Sprintf("api-%d@soak.example", i))
		if err != nil {
			return nil, err
		}
		c, err := refclient.New("http://"+host, token, refclient.WithHTTPClient(&http.Client{Transport: f.transport()}),
			refclient.WithPolicy(refclient.Policy{MaxElapsed: 30 * time.Second, Initial: 50 * time.Millisecond, Max: 2 * time.Second, TryTimeout: 20 * time.Second}))
		if err != nil {
			return nil, err
		}
		t.api = append(t.api, c)
	}
	for i := range cfg.shoppers {
		s, err := newShopper(f, fmt.Sprintf("shopper-%d@soak.example", i))
		if err != nil {
			return nil, err
		}
		t.shoppers = append(t.shoppers, s)
	}
	return t, nil
}

// run drives every client until ctx ends; an operation under way then
// finishes.
func (t *traffic) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range t.api {
		wg.Go(func() {
			for ctx.Err() == nil {
				t.apiOrder(c)
			}
		})
	}
	for _, s := range t.shoppers {
		wg.Go(func() {
			for ctx.Err() == nil {
				t.browserOrder(s)
			}
		})
	}
	wg.Wait()
}

// settle retries, with their own keys and bodies, the operations whose
// outcome was unknown, now that the faults are over; it returns how many
// there were.
func (t *traffic) settle(ctx context.Context) int {
	t.mu.Lock()
	pending := t.pending
	t.pending = nil
	t.mu.Unlock()
	for _, retry := range pending {
		if !retry(ctx) {
			t.breach("an operation still without a final answer after the faults ended")
		}
	}
	return len(pending)
}

func (t *traffic) count(what string, replayed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answers[what]++
	if replayed {
		t.replays++
	}
}

func (t *traffic) promise(orderID string, paid bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.created[orderID] = true
	if paid {
		t.paid[orderID] = true
	}
}

func (t *traffic) breach(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.breaches = append(t.breaches, what)
}

func (t *traffic) later(retry func(context.Context) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, retry)
}

func getJSON(c *http.Client, path string, v any) error {
	resp, err := c.Get("http://" + host + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// apiUser signs a user up and returns a bearer token.
func apiUser(c *http.Client, email string) (string, error) {
	creds := fmt.Sprintf(`{"email":%q,"password":"correct horse"}`, email)
	for _, path := range []string{"/api/v1/users", "/api/v1/tokens"} {
		resp, err := c.Post("http://"+host+path, "application/json", strings.NewReader(creds))
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return "", fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
		var token struct{ Token string }
		if json.Unmarshal(b, &token) == nil && token.Token != "" {
			return token.Token, nil
		}
	}
	return "", fmt.Errorf("no token for %s", email)
}

// idOf reads the id field of a JSON answer.
func idOf(body []byte, field string) string {
	var v map[string]any
	_ = json.Unmarshal(body, &v)
	s, _ := v[field].(string)
	return s
}
