// Package client is the reference client of the shop's JSON API: the
// client's half of the idempotency contract, for mobile and server
// developers to copy or use.
//
// Every write is one operation with one idempotency key, made once (or
// given by the caller) and sent unchanged, with the same body bytes, on
// every try of that operation. A try that gets no final answer — a network
// error, a timeout, a 5xx, a 409 or 429 with Retry-After — is retried after
// a capped exponential backoff with full jitter, or after the server's
// Retry-After when it gives one, within a bounded number of tries and a
// bounded total time. A final answer (2xx, 3xx, and 400, 401, 402, 404,
// 409 without Retry-After, 422) ends the operation at once.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"
)

// Policy bounds the retries of one operation.
type Policy struct {
	MaxTries   uint          // tries in all, the first included
	MaxElapsed time.Duration // from the first try to the start of the last
	Initial    time.Duration // the first backoff's cap
	Max        time.Duration // the cap of every backoff
	TryTimeout time.Duration // one try's bound, its answer included
}

// DefaultPolicy suits a phone: a few tries over half a minute.
var DefaultPolicy = Policy{MaxTries: 8, MaxElapsed: 30 * time.Second, Initial: 100 * time.Millisecond, Max: 5 * time.Second, TryTimeout: 15 * time.Second}

// Client talks to one shop as one user.
type Client struct {
	BaseURL string // e.g. http://localhost:8080, without a trailing slash
	Token   string // a bearer token from POST /api/v1/tokens
	Policy  Policy
	HTTP    *http.Client
}

// New returns a client of the shop at baseURL with the default policy.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: baseURL, Token: token, Policy: DefaultPolicy, HTTP: &http.Client{}}
}

// NewKey makes a fresh idempotency key: one per operation, never one per try.
func NewKey() string { return uuid.NewString() }

// Response is the final answer of an operation.
type Response struct {
	Key      string // the idempotency key every try carried
	Status   int
	Header   http.Header
	Body     []byte
	Replayed bool // the server sent a stored answer again (Idempotent-Replayed: true)
	Tries    int
}

// GaveUpError is returned when an operation's tries or time ran out
// before a final answer: its outcome is unknown. The operation may have
// happened; calling again with the same key and body finds out, safely.
type GaveUpError struct {
	Key   string
	Tries int
	Last  *Response // the last answer, if the last try got one
	Err   error     // why the last try did not end the operation
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("idempotency key %q: no final answer after %d tries: %v", e.Key, e.Tries, e.Err)
}

func (e *GaveUpError) Unwrap() error { return e.Err }

// Do runs one operation: it sends body (marshalled once, as JSON) to path
// under key until a final answer, which it returns whatever its status.
// An empty key gets a fresh one. A nil body sends none. The error is a
// *GaveUpError when no final answer came, or ctx's error.
func (c *Client) Do(ctx context.Context, method, path, key string, body any) (*Response, error) {
	if key == "" {
		key = NewKey()
	}
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	tries := 0
	var last *Response
	resp, err := backoff.Retry(ctx, func() (*Response, error) {
		tries++
		r, err := c.try(ctx, method, path, key, payload)
		if r != nil {
			r.Tries, last = tries, r
		}
		return r, err
	}, backoff.WithBackOff(newFullJitter(c.Policy)), backoff.WithMaxTries(c.Policy.MaxTries), backoff.WithMaxElapsedTime(c.Policy.MaxElapsed))
	if err == nil {
		return resp, nil
	}
	if ctx.Err() != nil {
		return last, ctx.Err()
	}
	var final *finalError
	if errors.As(err, &final) {
		return nil, final.err
	}
	return nil, &GaveUpError{Key: key, Tries: tries, Last: last, Err: err}
}

// finalError is an error no retry can mend (a request that cannot be
// built); it ends the operation.
type finalError struct{ err error }

func (e *finalError) Error() string { return e.err.Error() }

// try sends the operation once. It returns the answer and nil when the
// answer is final, and an error that says how long to wait otherwise.
func (c *Client) try(ctx context.Context, method, path, key string, payload []byte) (*Response, error) {
	if c.Policy.TryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Policy.TryTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, bytes.NewReader(payload))
	if err != nil {
		return nil, backoff.Permanent(&finalError{err})
	}
	req.Header.Set("Idempotency-Key", strconv.Quote(key))
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err // a network error or a timeout: retried
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err // the answer was cut off: retried
	}
	r := &Response{Key: key, Status: res.StatusCode, Header: res.Header, Body: b, Replayed: res.Header.Get("Idempotent-Replayed") == "true"}
	return r, retryOf(r)
}

// retryOf says whether an answer ends the operation (nil) or asks for
// another try, and when: after Retry-After when the server gives one,
// after the backoff otherwise.
func retryOf(r *Response) error {
	after, hasAfter := retryAfter(r.Header)
	switch {
	case r.Status >= 500:
	case r.Status == http.StatusTooManyRequests:
	case r.Status == http.StatusConflict && hasAfter:
		// The key, or another payment of the order, is still in progress.
	default:
		return nil
	}
	err := fmt.Errorf("%d %s", r.Status, http.StatusText(r.Status))
	if hasAfter {
		return errors.Join(err, &backoff.RetryAfterError{Duration: after})
	}
	return err
}

// retryAfter reads Retry-After, in seconds or as an HTTP date.
func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// Item is one line of an order.
type Item struct {
	ProductID string `json:"product_id"`
	Quantity  int    `json:"quantity"`
}

// CreateOrder places an order (POST /api/v1/orders) under key: 201 with
// the order, or a final refusal such as 422.
func (c *Client) CreateOrder(ctx context.Context, key string, items []Item) (*Response, error) {
	return c.Do(ctx, http.MethodPost, "/api/v1/orders", key, map[string][]Item{"items": items})
}

// Pay pays an order (POST /api/v1/orders/{id}/payments) under key: 201
// with the payment, 402 declined, or 409 when the order is already paid.
func (c *Client) Pay(ctx context.Context, key, orderID, method string) (*Response, error) {
	return c.Do(ctx, http.MethodPost, "/api/v1/orders/"+url.PathEscape(orderID)+"/payments", key, map[string]string{"payment_method": method})
}
