package tests

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/shop/shop/payments"
)

// The tests named Pins each hold one guard of the money code to its
// behaviour, through the API, the billing service's exported methods and
// the tables: each was seen to fail with its guard removed (the change
// planted is named above each test). They steer the provider with
// scripted, and hold requests at it with gates.

// The states of a payment attempt's or a refund's row, as the tables hold
// them.
const (
	stateInDoubt   = "in_doubt"
	stateSucceeded = "succeeded"
	statePending   = "pending"
	stateFailed    = "failed"
)

// scripted is a provider the test steers request by request: each charge
// and each refund request meets the next fate of its script, and a request
// beyond its script goes through to the provider it wraps. It records what
// it was asked to refund, and can hide what it did from lookups, as a
// provider's search that lags behind its requests does.
type scripted struct {
	payments.Provider
	t       *testing.T
	mu      sync.Mutex
	charges []fate
	refunds []fate
	asked   map[string]int64 // refund requests: the amount asked under each key
	lagging bool             // lookups show nothing
}

// fate is what one provider request meets: a gate that holds it at the
// provider, and whether its answer is lost (after the provider did what
// it asked, when reached).
type fate struct {
	held    *gate
	lost    bool
	reached bool
}

// errNoReply is a request whose answer never came back.
var errNoReply = errors.New("read: connection reset by peer")

func withScript(t *testing.T, charges, refunds []fate) (option, *scripted) {
	p := &scripted{t: t, charges: charges, refunds: refunds, asked: map[string]int64{}}
	return withProvider(func(inner payments.Provider) payments.Provider { p.Provider = inner; return p }), p
}

func (p *scripted) next(script *[]fate) fate {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(*script) == 0 {
		return fate{}
	}
	f := (*script)[0]
	*script = (*script)[1:]
	return f
}

// run meets fate f for a request that do sends on to the provider.
func (p *scripted) run(f fate, do func() error) error {
	if f.held != nil {
		f.held.hold(p.t)
	}
	if f.lost && !f.reached {
		return errNoReply
	}
	if err := do(); err != nil || !f.lost {
		return err
	}
	return errNoReply
}

func (p *scripted) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	var charge payments.Charge
	err := p.run(p.next(&p.charges), func() (err error) {
		charge, err = p.Provider.Charge(ctx, req)
		return err
	})
	if err != nil {
		return payments.Charge{}, err
	}
	return charge, nil
}

func (p *scripted) Refund(ctx context.Context, req payments.RefundRequest) (payments.RefundAnswer, error) {
	p.mu.Lock()
	p.asked[req.IdempotencyKey] = req.AmountCents
	p.mu.Unlock()
	var answer payments.RefundAnswer
	err := p.run(p.next(&p.refunds), func() (err error) {
		answer, err = p.Provider.Refund(ctx, req)
		return err
	})
	if err != nil {
		return payments.RefundAnswer{}, err
	}
	return answer, nil
}

func (p *scripted) Find(ctx context.Context, req payments.ChargeRequest) (payments.Charge, bool, error) {
	if p.lags() {
		return payments.Charge{}, false, nil
	}
	return p.Provider.Find(ctx, req)
}

func (p *scripted) FindRefund(ctx context.Context, req payments.RefundRequest) (payments.RefundAnswer, bool, error) {
	if p.lags() {
		return payments.RefundAnswer{}, false, nil
	}
	return p.Provider.FindRefund(ctx, req)
}

// answering drops what is left of the scripts: the provider answers every
// request from now on.
func (p *scripted) answering() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.charges, p.refunds = nil, nil
}

func (p *scripted) lags() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lagging
}

func (p *scripted) setLagging(lagging bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lagging = lagging
}

// refundsAsked is the sum of the amounts the provider was asked to refund,
// one request per key, and the number of keys.
func (p *scripted) refundsAsked() (int64, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var sum int64
	for _, amount := range p.asked {
		sum += amount
	}
	return sum, len(p.asked)
}

// gate holds one request at the provider until the test opens it. It also
// opens when the test ends, before any cleanup runs: the servers' Close,
// in their cleanups, waits for the requests they serve, and a failing test
// must fail instead of hanging there.
type gate struct {
	entered, opened chan struct{}
	once            sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), opened: make(chan struct{})} }

func (g *gate) hold(t *testing.T) {
	close(g.entered)
	select {
	case <-g.opened:
	case <-t.Context().Done():
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.opened) }) }
