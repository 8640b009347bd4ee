package main

import (
	"io"
	"testing"

	"github.com/shop/shop/config"
	"github.com/shop/shop/httpkit"
)

// The process's logger adds request ids itself, text or JSON: the payments
// service main builds logs through it, not through the server's.
func TestProcessLoggerCarriesRequestIDs(t *testing.T) {
	for _, json := range []bool{false, true} {
		format := map[bool]string{false: "text", true: "json"}[json]
		h := newLogger(config.Config{LogFormat: format}, io.Discard).Handler()
		if httpkit.RequestIDs(h) != h {
			t.Errorf("LogJSON %v: the logger does not add request ids", json)
		}
	}
}
