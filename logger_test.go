package main

import (
	"io"
	"testing"

	"github.com/shop/shop/handlers"
)

// The process's logger adds request ids itself, text or JSON: the payments
// service main builds logs through it, not through the server's.
func TestProcessLoggerCarriesRequestIDs(t *testing.T) {
	for _, json := range []bool{false, true} {
		h := newLogger(config{LogJSON: json}, io.Discard).Handler()
		if handlers.RequestIDs(h) != h {
			t.Errorf("LogJSON %v: the logger does not add request ids", json)
		}
	}
}
