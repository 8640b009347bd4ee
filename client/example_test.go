package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/shop/shop/client"
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

	c := client.New(shop.URL, "shp_…")
	resp, err := c.Pay(context.Background(), client.NewKey(), "e3b39edc-162c-4c5c-b7a6-4bb53648a993", "pm_card_visa")
	if err != nil {
		fmt.Println("outcome unknown; ask again later with the same key:", err)
		return
	}
	fmt.Println(resp.Status, "after", resp.Tries, "tries, replayed:", resp.Replayed)
	// Output: 201 after 2 tries, replayed: true
}
