package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"

	refclient "github.com/shop/shop/client"
)

// apiOrder is one API customer's order: placed, paid (now and then with a
// card that is declined first), sometimes paid again under another key
// (which must be told it is paid already), sometimes placed again under
// its key (which must replay the first answer).
func (t *traffic) apiOrder(c *refclient.Client) {
	ctx := context.Background()
	items := []refclient.Item{{ProductID: t.products[rand.IntN(len(t.products))], Quantity: 1 + rand.IntN(3)}}
	orderKey := refclient.NewKey()
	created, ok := t.apiCall(ctx, "create", func(ctx context.Context) (*refclient.Response, error) { return c.CreateOrder(ctx, orderKey, items) })
	if !ok || created.Status != http.StatusCreated {
		return
	}
	orderID := idOf(created.Body, "id")
	if rand.IntN(10) == 0 {
		payKey := refclient.NewKey()
		t.apiCall(ctx, "pay declined", func(ctx context.Context) (*refclient.Response, error) {
			return c.Pay(ctx, payKey, orderID, "pm_card_declined")
		})
	}
	payKey := refclient.NewKey()
	paid, ok := t.apiCall(ctx, "pay", func(ctx context.Context) (*refclient.Response, error) {
		return c.Pay(ctx, payKey, orderID, "pm_card_visa")
	})
	if ok && paid.Status == http.StatusCreated && rand.IntN(4) == 0 {
		otherKey := refclient.NewKey()
		t.apiCall(ctx, "pay again", func(ctx context.Context) (*refclient.Response, error) {
			return c.Pay(ctx, otherKey, orderID, "pm_card_mastercard")
		})
	}
	if rand.IntN(4) == 0 {
		again, ok := t.apiCall(ctx, "create again", func(ctx context.Context) (*refclient.Response, error) { return c.CreateOrder(ctx, orderKey, items) })
		if ok && (!again.Replayed || !bytes.Equal(again.Body, created.Body)) {
			t.breach(fmt.Sprintf("order key %s: a retry answered %d %s, not the first answer replayed", orderKey, again.Status, again.Body))
		}
	}
}

// apiAnswers are the final answers each API operation may get.
var apiAnswers = map[string][]int{
	"create": {201}, "create again": {201}, "pay": {201}, "pay declined": {402}, "pay again": {409},
}

// apiCall makes one operation, counts its answer and checks it is one the
// operation may get. An operation without a final answer is kept, to be
// made again (same key, same body) once the faults are over.
func (t *traffic) apiCall(ctx context.Context, what string, op func(context.Context) (*refclient.Response, error)) (*refclient.Response, bool) {
	resp, err := op(ctx)
	var gaveUp *refclient.GaveUpError
	if errors.As(err, &gaveUp) {
		t.count("api "+what+" unknown", false)
		t.later(func(ctx context.Context) bool {
			resp, err := op(ctx)
			if err == nil {
				t.checkAPI(what, resp)
			}
			return err == nil
		})
		return nil, false
	}
	if err != nil {
		t.breach(fmt.Sprintf("api %s: %v", what, err))
		return nil, false
	}
	t.checkAPI(what, resp)
	return resp, true
}

func (t *traffic) checkAPI(what string, resp *refclient.Response) {
	t.count(fmt.Sprintf("api %s %d", what, resp.Status), resp.Replayed)
	for _, ok := range apiAnswers[what] {
		if resp.Status == ok {
			switch {
			case strings.HasPrefix(what, "create"):
				t.promise(idOf(resp.Body, "id"), false)
			case what == "pay" && ok == http.StatusCreated:
				t.promise(idOf(resp.Body, "order_id"), true)
			}
			return
		}
	}
	t.breach(fmt.Sprintf("api %s answered %d %s", what, resp.Status, resp.Body))
}
