package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fault is what faultProxy does to one connection.
type fault int

const (
	pass      fault = iota // forward both ways
	dropReply              // forward the request; once the server answers, reset the client's connection
	cutReply               // forward the request and half of the answer's first bytes, then reset
	inject503              // answer 503 itself, marked X-Fault-Injected, without forwarding
	faultKinds
)

// faultProxy sits between client and server on 127.0.0.1 and breaks
// connections at random (seeded, so a failure can be replayed), each
// connection carrying one request. Dropped and cut answers come after the
// server has answered, so after the operation committed: the client cannot
// tell whether it happened.
type faultProxy struct {
	t        *testing.T
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	rng      *rand.Rand
	weights  [faultKinds]int
	counts   [faultKinds]atomic.Int64
	conns    sync.WaitGroup
}

func newFaultProxy(t *testing.T, upstream string, seed uint64, weights [faultKinds]int) *faultProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, ln: ln, upstream: strings.TrimPrefix(upstream, "http://"), rng: rand.New(rand.NewPCG(seed, seed)), weights: weights}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.conns.Wait()
	})
	return p
}

func (p *faultProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *faultProxy) pick() fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	for _, w := range p.weights {
		total += w
	}
	n := p.rng.IntN(total)
	for f, w := range p.weights {
		if n < w {
			return fault(f)
		}
		n -= w
	}
	return pass
}

func (p *faultProxy) serve() {
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		go func() {
			defer p.conns.Done()
			p.handle(conn.(*net.TCPConn))
		}()
	}
}

// reset closes conn with a TCP RST instead of a FIN.
func reset(conn *net.TCPConn) {
	_ = conn.SetLinger(0)
	conn.Close()
}

func (p *faultProxy) handle(client *net.TCPConn) {
	defer client.Close()
	_ = client.SetDeadline(time.Now().Add(30 * time.Second))
	f := p.pick()
	p.counts[f].Add(1)
	if f == inject503 {
		// Read the request first, so that closing does not reset it.
		if req, err := http.ReadRequest(bufio.NewReader(client)); err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
		}
		_, _ = io.WriteString(client, "HTTP/1.1 503 Service Unavailable\r\nX-Fault-Injected: true\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return
	}
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer server.Close()
	_ = server.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _, _ = io.Copy(server, client) }()
	if f == pass {
		_, _ = io.Copy(client, server)
		return
	}
	first := make([]byte, 4096)
	n, err := server.Read(first)
	if err != nil {
		return
	}
	if f == cutReply {
		_, _ = client.Write(first[:n/2])
	}
	reset(client)
}

// stormClient sends each request on a connection of its own, so that the
// proxy's faults hit one request each and nothing is retried behind the
// test's back. The server's answers are checked against the API's document.
var stormClient = &http.Client{
	Timeout:   15 * time.Second,
	Transport: contractTransport{next: &http.Transport{DisableKeepAlives: true}},
}

func stormSend(base string, r request) (response, error) {
	req, err := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Idempotency-Key", *r.key)
	resp, err := stormClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: body}, err
}

// A retry storm through a proxy that cuts answers at random: every
// operation (an order, then its payment) is sent until it gets a final
// answer. At the end: one order per operation, one charge per paid order,
// every order paid, no 5xx but the proxy's own, and each key still answers
// with what its client finally got.
func TestRetryStormThroughAFaultyNetwork(t *testing.T) {
	e := newEnv(t, withLatency(5*time.Millisecond))
	token := e.signUp("storm-proxy@example.com")
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d", seed)
	proxy := newFaultProxy(t, e.url, seed, [faultKinds]int{pass: 5, dropReply: 3, cutReply: 2, inject503: 1})
	const n, workers = 30, 6
	ops := newOperations(e, token, n)
	final := make(map[string]response, 2*n)
	var finalMu sync.Mutex

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var injected, unexpected5xx, sends atomic.Int64
	// untilAnswered sends r until an answer that is not a retryable 409,
	// a broken connection or an injected 503.
	untilAnswered := func(r request) (response, error) {
		backoff := 5 * time.Millisecond
		for {
			sends.Add(1)
			resp, err := stormSend(proxy.url(), r)
			switch {
			case err != nil || retryable(resp):
			case resp.Status >= 500 && resp.Header.Get("X-Fault-Injected") == "true":
				injected.Add(1)
			case resp.Status >= 500:
				unexpected5xx.Add(1)
				return resp, fmt.Errorf("%s: unexpected %d %s", *r.key, resp.Status, resp.Body)
			default:
				finalMu.Lock()
				final[*r.key] = resp
				finalMu.Unlock()
				return resp, nil
			}
			select {
			case <-ctx.Done():
				return resp, errors.Join(ctx.Err(), err)
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 50*time.Millisecond)
		}
	}
	queue := make(chan *operation, n)
	for _, o := range ops {
		queue <- o
	}
	close(queue)
	errs := make(chan error, n)
	for range workers {
		go func() {
			for o := range queue {
				created, err := untilAnswered(o.create)
				if err == nil && created.Status != http.StatusCreated {
					err = fmt.Errorf("%s: %d %s", *o.create.key, created.Status, created.Body)
				}
				if err == nil {
					o.orderID, err = created.field("id")
				}
				if err == nil {
					var paid response
					paid, err = untilAnswered(o.payment())
					if err == nil && paid.Status != http.StatusCreated {
						err = fmt.Errorf("pay %s: %d %s", o.orderID, paid.Status, paid.Body)
					}
				}
				errs <- err
			}
		}()
	}
	for range ops {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d sends; faults: %d passed, %d replies dropped, %d cut, %d 503 injected",
		sends.Load(), proxy.counts[pass].Load(), proxy.counts[dropReply].Load(), proxy.counts[cutReply].Load(), proxy.counts[inject503].Load())
	if proxy.counts[dropReply].Load() == 0 || proxy.counts[cutReply].Load() == 0 {
		t.Fatal("the proxy injected no dropped or cut answers: the storm proved nothing")
	}
	if unexpected5xx.Load() != 0 {
		t.Fatalf("%d 5xx answers not injected by the proxy", unexpected5xx.Load())
	}
	wantExactlyOnce(t, e, ops)
	// Every key, asked again directly, answers what its client finally got.
	for _, o := range ops {
		for _, r := range []request{o.create, o.payment()} {
			again := e.do(r)
			if again.Status != final[*r.key].Status || string(again.Body) != string(final[*r.key].Body) {
				t.Fatalf("%s answers %d %s, but its client got %d %s", *r.key, again.Status, again.Body, final[*r.key].Status, final[*r.key].Body)
			}
		}
	}
}
