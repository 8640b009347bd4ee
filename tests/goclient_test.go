package tests

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	openapi_types "github.com/oapi-codegen/runtime/types"

	refclient "github.com/shop/shop/client"
	shopclient "github.com/shop/shop/clients/go"
)

// The Go client generated from openapi.yaml by oapi-codegen's default
// configuration (clients/go), sending through client/'s retrying Doer,
// walks through the API against a running server, every call also checked
// against the document by the contract client: sign up, a token, an order, its replay, the key reused for another
// body (422, decoded as a Problem), one page of pagination, a payment.
func TestGeneratedGoClientWalkThrough(t *testing.T) {
	e := newEnv(t)
	walkThroughWithGoClient(t, e, e.url, client, "go-client@example.com")
}

// walkedThrough is what the walk-through leaves: its account's token, an
// order it paid and one whose card was declined.
type walkedThrough struct {
	token, paid, declined string
}

// walkThroughWithGoClient runs the walk-through through doer against
// baseURL, the server of e or a proxy in front of it, and checks what it
// wrote: two orders, one charge, one declined payment.
func walkThroughWithGoClient(t *testing.T, e *env, baseURL string, doer shopclient.HttpRequestDoer, email string) walkedThrough {
	t.Helper()
	ctx := context.Background()
	anon, err := refclient.New(baseURL, "", refclient.WithHTTPClient(doer))
	must(t, err)
	creds := shopclient.Credentials{Email: openapi_types.Email(email), Password: "correct horse"}
	user, err := anon.CreateUserWithResponse(ctx, nil, creds)
	must(t, err)
	if user.JSON201 == nil || user.JSON201.Email != email {
		t.Fatalf("sign up: %d %s", user.StatusCode(), user.Body)
	}
	token, err := anon.CreateTokenWithResponse(ctx, creds)
	must(t, err)
	if token.JSON201 == nil || token.HTTPResponse.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token: %d %s", token.StatusCode(), token.Body)
	}
	c, err := refclient.New(baseURL, token.JSON201.Token, refclient.WithHTTPClient(doer))
	must(t, err)
	catalog, err := c.ListProductsWithResponse(ctx)
	must(t, err)
	if catalog.JSON200 == nil || len(catalog.JSON200.Products) < 2 {
		t.Fatalf("products: %d %s", catalog.StatusCode(), catalog.Body)
	}
	products := catalog.JSON200.Products
	line := func(p shopclient.Product, quantity int) shopclient.OrderInput {
		return shopclient.OrderInput{Items: []shopclient.OrderLine{{ProductId: p.Id.String(), Quantity: quantity}}}
	}

	orderKey := uuid.NewString()
	first := placeWithGoClient(t, c, orderKey, line(products[0], 2))
	if first.Headers201.IdempotentReplayed != nil || first.Headers201.Location != "/api/v1/orders/"+first.JSON201.Id.String() {
		t.Fatalf("first answer: replayed %v, Location %q", first.Headers201.IdempotentReplayed, first.Headers201.Location)
	}
	replay := placeWithGoClient(t, c, orderKey, line(products[0], 2))
	if r := replay.Headers201.IdempotentReplayed; r == nil || *r != "true" || !refclient.Replayed(replay.HTTPResponse) || replay.JSON201.Id != first.JSON201.Id {
		t.Fatalf("replay: Idempotent-Replayed %v, order %s, want true and %s", r, replay.JSON201.Id, first.JSON201.Id)
	}
	reused, err := c.CreateOrderWithResponse(ctx, &shopclient.CreateOrderParams{IdempotencyKey: orderKey}, line(products[0], 3))
	must(t, err)
	expectProblem(t, reused.HTTPResponse, reused.Body, 422, "/problems/idempotency-key-reused")
	if reused.ApplicationproblemJSON422 == nil || reused.ApplicationproblemJSON422.Type != "/problems/idempotency-key-reused" {
		t.Fatalf("the generated 422 field: %+v", reused.ApplicationproblemJSON422)
	}
	unknown := shopclient.OrderInput{Items: []shopclient.OrderLine{{ProductId: uuid.NewString(), Quantity: 1}}}
	invalid, err := c.CreateOrderWithResponse(ctx, &shopclient.CreateOrderParams{IdempotencyKey: uuid.NewString()}, unknown)
	must(t, err)
	if p := expectProblem(t, invalid.HTTPResponse, invalid.Body, 422, "/problems/validation"); p.Errors == nil || (*p.Errors)[0].Field != "items[0].product_id" {
		t.Fatalf("validation problem without the field's error: %+v", p.Errors)
	}
	second := placeWithGoClient(t, c, "", line(products[1], 1)) // the client makes the key

	pageOne := listWithGoClient(t, c, nil)
	if len(pageOne.Orders) != 1 || pageOne.Orders[0].Id != second.JSON201.Id || pageOne.NextCursor == nil {
		t.Fatalf("page one: %+v", pageOne)
	}
	pageTwo := listWithGoClient(t, c, pageOne.NextCursor)
	if len(pageTwo.Orders) != 1 || pageTwo.Orders[0].Id != first.JSON201.Id || pageTwo.NextCursor != nil {
		t.Fatalf("page two: %+v", pageTwo)
	}

	paid, err := c.CreatePaymentWithResponse(ctx, first.JSON201.Id.String(), &shopclient.CreatePaymentParams{IdempotencyKey: uuid.NewString()},
		shopclient.PaymentInput{PaymentMethod: shopclient.PaymentInputPaymentMethod("pm_card_visa")})
	must(t, err)
	if paid.JSON201 == nil || paid.JSON201.Status != shopclient.PaymentStatus("succeeded") || paid.JSON201.AmountCents != first.JSON201.TotalCents {
		t.Fatalf("payment: %d %s", paid.StatusCode(), paid.Body)
	}
	declined, err := c.CreatePaymentWithResponse(ctx, second.JSON201.Id.String(), &shopclient.CreatePaymentParams{IdempotencyKey: uuid.NewString()},
		shopclient.PaymentInput{PaymentMethod: shopclient.PaymentInputPaymentMethod("pm_card_declined")})
	must(t, err)
	if p := expectProblem(t, declined.HTTPResponse, declined.Body, 402, "/problems/payment-declined"); p.Payment == nil || p.Payment.Status != shopclient.PaymentStatus("declined") {
		t.Fatalf("declined without its payment: %+v", p.Payment)
	}
	missing, err := c.GetOrderWithResponse(ctx, uuid.NewString())
	must(t, err)
	expectProblem(t, missing.HTTPResponse, missing.Body, 404, "/problems/not-found")

	order, err := c.GetOrderWithResponse(ctx, first.JSON201.Id.String())
	must(t, err)
	if order.JSON200 == nil || order.JSON200.Status != shopclient.OrderStatus("paid") || len(order.JSON200.Payments) != 1 {
		t.Fatalf("the paid order: %d %s", order.StatusCode(), order.Body)
	}
	var userID string
	if err := e.db.Table("users").Where("email = ?", email).Pluck("id", &userID).Error; err != nil {
		t.Fatal(err)
	}
	orders, payments := e.count("orders", "user_id = ?", userID), e.count("payments", "order_id IN (?, ?)", first.JSON201.Id.String(), second.JSON201.Id.String())
	charged := e.count("simulated_charges", "status = ? AND amount_cents = ?", "succeeded", first.JSON201.TotalCents)
	if orders != 2 || payments != 2 || charged != 1 {
		t.Fatalf("wrote %d orders, %d payments, %d charges; want 2, 2 (one declined) and 1", orders, payments, charged)
	}
	return walkedThrough{token: token.JSON201.Token, paid: first.JSON201.Id.String(), declined: second.JSON201.Id.String()}
}

func placeWithGoClient(t *testing.T, c *shopclient.ClientWithResponses, key string, body shopclient.OrderInput) *shopclient.CreateOrderResponse {
	t.Helper()
	r, err := c.CreateOrderWithResponse(context.Background(), &shopclient.CreateOrderParams{IdempotencyKey: key}, body)
	must(t, err)
	if r.JSON201 == nil || r.Headers201 == nil {
		t.Fatalf("create order: %d %s", r.StatusCode(), r.Body)
	}
	return r
}

type orderPage struct {
	Orders     []shopclient.Order
	NextCursor *string
}

func listWithGoClient(t *testing.T, c *shopclient.ClientWithResponses, after *string) orderPage {
	t.Helper()
	limit := 1
	r, err := c.ListOrdersWithResponse(context.Background(), &shopclient.ListOrdersParams{Limit: &limit, After: after})
	must(t, err)
	if r.JSON200 == nil {
		t.Fatalf("list orders: %d %s", r.StatusCode(), r.Body)
	}
	return orderPage{Orders: r.JSON200.Orders, NextCursor: r.JSON200.NextCursor}
}

// expectProblem decodes an error answer as the one Problem type, whatever
// the call, and checks its status and type.
func expectProblem(t *testing.T, rsp *http.Response, body []byte, status int, typ string) *shopclient.Problem {
	t.Helper()
	p, err := shopclient.DecodeProblem(rsp, body)
	if err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if rsp.StatusCode != status || p.Status != status || p.Type != typ {
		t.Fatalf("answered %d %+v, want %d %s", rsp.StatusCode, p, status, typ)
	}
	return p
}
