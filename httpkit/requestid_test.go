package httpkit

import (
	"strings"
	"testing"
)

// A request id is the client's own only when it is 1 to 64 bytes of
// visible ASCII, each edge checked: what net/http refuses before a handler
// sees it (controls but the tab, DEL) is refused here too, and so is what
// it lets through (spaces, tabs, bytes beyond ASCII).
func TestRequestIDIsAVisibleASCIIToken(t *testing.T) {
	cases := map[string]bool{
		"":                      false,
		"a":                     true,
		"!":                     true,
		"~":                     true,
		strings.Repeat("x", 64): true,
		strings.Repeat("x", 65): false,
		" ":                     false,
		"a b":                   false,
		"a\tb":                  false,
		"a\x00b":                false,
		"a\x1fb":                false,
		"a\x7fb":                false,
		"caf\xc3\xa9":           false,
		"\x80":                  false,
		"\xff":                  false,
	}
	for id, want := range cases {
		if got := isToken(id); got != want {
			t.Errorf("isToken(%q) = %v, want %v", id, got, want)
		}
	}
}
