package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/shop/shop/client"
	shopclient "github.com/shop/shop/clients/go"
)

// A payment whose first try meets a 503: the client tries again under the
// same key, and the shop's answer tells whether it was stored before.
func Example() {
	var tries atomic.Int32
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tries.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
	}))
	defer shop.Close()

	c, err := client.New(shop.URL, "shp_…")
	if err != nil {
		panic(err)
	}
	rsp, err := c.CreatePaymentWithResponse(context.Background(), "e3b39edc-162c-4c5c-b7a6-4bb53648a993",
		&shopclient.CreatePaymentParams{IdempotencyKey: client.NewKey()}, // or empty: the client makes one
		shopclient.PaymentInput{PaymentMethod: "pm_card_visa"})
	if err != nil {
		fmt.Println("outcome unknown; send it again later with the same key:", err)
		return
	}
	fmt.Println(rsp.StatusCode(), "after", tries.Load(), "tries, replayed:", client.Replayed(rsp.HTTPResponse))
	// Output: 201 after 2 tries, replayed: true
}
