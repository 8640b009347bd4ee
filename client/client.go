// Package client is the shop's Go client: the typed calls generated from
// openapi/openapi.yaml (clients/go), sent through a Doer that keeps the
// client's half of the idempotency contract. A POST carries one key, the
// caller's or a fresh one, unchanged with the same body on every try. A
// try without a final answer (a network error, a timeout, a 5xx, a 429, a
// 409 with Retry-After) is retried after the server's Retry-After or a
// capped exponential backoff with full jitter, within bounded tries and time.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"

	shopclient "github.com/shop/shop/clients/go"
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

// Doer is the generated client's HttpRequestDoer: each request is one
// operation, retried under Policy through HTTP (an *http.Client, say).
type Doer struct {
	HTTP   shopclient.HttpRequestDoer
	Policy Policy
}

// Option sets up the Doer that New gives the generated client.
type Option func(*Doer)

// WithPolicy bounds the retries; DefaultPolicy otherwise.
func WithPolicy(p Policy) Option { return func(d *Doer) { d.Policy = p } }

// WithHTTPClient sends the tries through h; http.DefaultClient otherwise.
func WithHTTPClient(h shopclient.HttpRequestDoer) Option { return func(d *Doer) { d.HTTP = h } }

// New returns the typed client of the shop at baseURL as the user of token
// (from CreateToken; none when empty), its requests sent through a Doer.
func New(baseURL, token string, opts ...Option) (*shopclient.ClientWithResponses, error) {
	d := &Doer{HTTP: http.DefaultClient, Policy: DefaultPolicy}
	for _, o := range opts {
		o(d)
	}
	return shopclient.NewClientWithResponses(baseURL, shopclient.WithHTTPClient(d),
		shopclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			return nil
		}))
}

// NewKey makes a fresh idempotency key: one per operation, never one per try.
func NewKey() string { return uuid.NewString() }

// Replayed says whether an answer is one the shop stored and sent again
// (Idempotent-Replayed: true): the operation had happened already.
func Replayed(res *http.Response) bool { return res.Header.Get("Idempotent-Replayed") == "true" }

// GaveUpError: tries or time ran out before a final answer. It may have
// happened; sending it again with the same key and body finds out, safely.
type GaveUpError struct {
	Key   string         // the idempotency key every try carried; empty for a read
	Tries int            // tries made
	Last  *http.Response // the last answer, if the last try got one
	Err   error          // why the last try did not end the operation
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("idempotency key %q: no final answer after %d tries: %v", e.Key, e.Tries, e.Err)
}

func (e *GaveUpError) Unwrap() error { return e.Err }

// Do runs req as one operation until a final answer, whatever its status,
// its body read in full. The error is a *GaveUpError when no final answer
// came, or the context's.
func (d *Doer) Do(req *http.Request) (*http.Response, error) {
	payload, err := readBody(req)
	if err != nil {
		return nil, err
	}
	if req.Method == http.MethodPost && req.Header.Get("Idempotency-Key") == "" {
		req.Header.Set("Idempotency-Key", NewKey())
	}
	tries := 0
	var last *http.Response
	res, err := backoff.Retry(req.Context(), func() (*http.Response, error) {
		tries++
		r, err := d.try(req, payload)
		last = r
		return r, err
	}, backoff.WithBackOff(newFullJitter(d.Policy)), backoff.WithMaxTries(d.Policy.MaxTries), backoff.WithMaxElapsedTime(d.Policy.MaxElapsed))
	if err == nil {
		return res, nil
	}
	if req.Context().Err() != nil {
		return nil, req.Context().Err()
	}
	return nil, &GaveUpError{Key: req.Header.Get("Idempotency-Key"), Tries: tries, Last: last, Err: err}
}

// fullJitter is capped exponential backoff with full jitter: the n-th wait
// is drawn uniformly from [0, min(Max, Initial·2ⁿ)], so that clients
// failed by one outage do not come back in step.
type fullJitter struct{ ceiling *backoff.ExponentialBackOff }

func newFullJitter(p Policy) *fullJitter {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = p.Initial, p.Max
	b.Multiplier, b.RandomizationFactor = 2, 0
	return &fullJitter{ceiling: b}
}

func (j *fullJitter) NextBackOff() time.Duration {
	return rand.N(max(j.ceiling.NextBackOff(), 0) + 1)
}

func (j *fullJitter) Reset() { j.ceiling.Reset() }

// readBody takes the request's body once, to send the same bytes on every try.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	return io.ReadAll(req.Body)
}

// try sends the operation once: a final answer and nil, or an error that
// says how long to wait.
func (d *Doer) try(req *http.Request, payload []byte) (*http.Response, error) {
	ctx := req.Context()
	if d.Policy.TryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Policy.TryTimeout)
		defer cancel()
	}
	one := req.Clone(ctx)
	if payload != nil {
		one.Body = io.NopCloser(bytes.NewReader(payload))
	}
	res, err := d.HTTP.Do(one)
	if err != nil {
		return nil, err // a network error or a timeout: retried
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err // the answer was cut off: retried
	}
	res.Body = io.NopCloser(bytes.NewReader(b))
	return res, retryOf(res)
}

// retryOf is nil for a final answer, or else an error asking for another
// try: after Retry-After when the server gives one, the backoff otherwise.
func retryOf(r *http.Response) error {
	after, hasAfter := retryAfter(r.Header)
	// A 409 with Retry-After: the key, or another payment of the order, is still in progress.
	if r.StatusCode < 500 && r.StatusCode != http.StatusTooManyRequests && (r.StatusCode != http.StatusConflict || !hasAfter) {
		return nil
	}
	err := fmt.Errorf("%d %s", r.StatusCode, http.StatusText(r.StatusCode))
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
