package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"

	refclient "github.com/shop/shop/client"
	shopclient "github.com/shop/shop/clients/go"
)

// apiOrder is one API customer's order: placed, paid (now and then with a
// card that is declined first), sometimes paid again under another key
// (which must be told it is paid already), sometimes placed again under
// its key (which must replay the first answer).
func (t *traffic) apiOrder(c *shopclient.ClientWithResponses) {
	ctx := context.Background()
	items := shopclient.OrderInput{Items: []shopclient.OrderLine{{ProductId: t.products[rand.IntN(len(t.products))], Quantity: 1 + rand.IntN(3)}}}
	orderKey := &shopclient.CreateOrderParams{IdempotencyKey: refclient.NewKey()}
	created, ok := t.apiCall(ctx, "create", func(ctx context.Context) (*http.Response, error) { return c.CreateOrder(ctx, orderKey, items) })
	if !ok || created.status != http.StatusCreated {
		return
	}
	orderID := idOf(created.body, "id")
	pay := func(what, method string) (*answer, bool) {
		key := &shopclient.CreatePaymentParams{IdempotencyKey: refclient.NewKey()}
		return t.apiCall(ctx, what, func(ctx context.Context) (*http.Response, error) {
			return c.CreatePayment(ctx, orderID, key, shopclient.PaymentInput{PaymentMethod: shopclient.PaymentInputPaymentMethod(method)})
		})
	}
	if rand.IntN(10) == 0 {
		pay("pay declined", "pm_card_declined")
	}
	if paid, ok := pay("pay", "pm_card_visa"); ok && paid.status == http.StatusCreated && rand.IntN(4) == 0 {
		pay("pay again", "pm_card_mastercard")
	}
	if rand.IntN(4) == 0 {
		again, ok := t.apiCall(ctx, "create again", func(ctx context.Context) (*http.Response, error) { return c.CreateOrder(ctx, orderKey, items) })
		if ok && (!again.replayed || !bytes.Equal(again.body, created.body)) {
			t.breach(fmt.Sprintf("order key %s: a retry answered %d %s, not the first answer replayed", orderKey.IdempotencyKey, again.status, again.body))
		}
	}
}

// answer is an operation's final answer.
type answer struct {
	status   int
	body     []byte
	replayed bool
}

// apiAnswers are the final answers each API operation may get.
var apiAnswers = map[string][]int{
	"create": {201}, "create again": {201}, "pay": {201}, "pay declined": {402}, "pay again": {409},
}

// apiCall makes one operation, counts its answer and checks it is one the
// operation may get. An operation without a final answer is kept, to be
// made again (same key, same body) once the faults are over.
func (t *traffic) apiCall(ctx context.Context, what string, op func(context.Context) (*http.Response, error)) (*answer, bool) {
	resp, err := answerOf(op(ctx))
	var gaveUp *refclient.GaveUpError
	if errors.As(err, &gaveUp) {
		t.count("api "+what+" unknown", false)
		t.later(func(ctx context.Context) bool {
			resp, err := answerOf(op(ctx))
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

// answerOf reads the answer the client has in memory.
func answerOf(resp *http.Response, err error) (*answer, error) {
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	return &answer{status: resp.StatusCode, body: body, replayed: refclient.Replayed(resp)}, err
}

func (t *traffic) checkAPI(what string, resp *answer) {
	t.count(fmt.Sprintf("api %s %d", what, resp.status), resp.replayed)
	for _, ok := range apiAnswers[what] {
		if resp.status == ok {
			switch {
			case strings.HasPrefix(what, "create"):
				t.promise(idOf(resp.body, "id"), false)
			case what == "pay" && ok == http.StatusCreated:
				t.promise(idOf(resp.body, "order_id"), true)
			}
			return
		}
	}
	t.breach(fmt.Sprintf("api %s answered %d %s", what, resp.status, resp.body))
}
