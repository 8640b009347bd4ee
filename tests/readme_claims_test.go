package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// keyWords is what README's first paragraph calls the write each handler
// does: the writes behind the idempotency middleware are named before the
// sentence "… take no key.", the others in it.
var keyWords = map[string]string{
	"createOrder":         "order",
	"createPayment":       "payment",
	"createRefund":        "refund",
	"createRefundRequest": "refund request",
	"cancelOrder":         "cancel", "staffCancel": "cancel",
	"changePassword": "password change",
	"staffDecline":   "decline", "staffRestock": "restock", "staffAskProvider": "ask the provider now",
	"stripeEvent":      "Stripe's webhook deliveries",
	"redeliverWebhook": "webhook redelivery", "staffRedeliver": "webhook redelivery", "retryParkedEvent": "parked event's retry", "staffRetryParked": "parked event's retry",
	"createUser": "Sign-up",
	"logout":     "log-out", "revokeToken": "log-out",
	"createToken":  "tokens",
	"authenticate": "the simulated provider's authentication page",
}

// README's first claim is the router's: every write route that
// handlers/routes.go mounts behind the middleware (once, onceAtomic) is
// named before the sentence saying what takes no key, and every other write
// route in that sentence; a route that gets or loses its key makes README
// wrong, and this test says so.
func TestREADMESaysWhichWritesTakeAKey(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, first, _ := strings.Cut(string(readme), "\n\n")
	first, _, _ = strings.Cut(first, "\n\n")
	first = strings.Join(strings.Fields(first), " ")
	end := strings.Index(first, " take no key.")
	if end < 0 {
		t.Fatalf("README's first paragraph does not say which writes take no key: %q", first)
	}
	start := strings.LastIndex(first[:end], ". ") + 2
	keyed, unkeyed := first[:start], first[start:end]

	writes := routeWrites(t)
	if len(writes) < 15 {
		t.Fatalf("handlers/routes.go mounts %d write routes", len(writes))
	}
	for handler, once := range writes {
		word, ok := keyWords[handler]
		switch {
		case !ok:
			t.Errorf("handlers/routes.go mounts the write %s: say in README's first paragraph whether it takes a key, and in keyWords what README calls it", handler)
		case once && !strings.Contains(keyed, word):
			t.Errorf("%s is behind the middleware: README's first paragraph does not name %q among the writes that take a key", handler, word)
		case !once && !strings.Contains(unkeyed, word):
			t.Errorf("%s takes no key: README's sentence %q does not name %q", handler, unkeyed+" take no key.", word)
		case once && strings.Contains(unkeyed, word):
			t.Errorf("%s is behind the middleware, but README says %q takes no key", handler, word)
		}
	}
}

// routeWrites is each handler that handlers/routes.go mounts on a POST, PUT,
// PATCH or DELETE route, and whether its chain holds the middleware.
func routeWrites(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../handlers/routes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		method, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.Contains(" POST PUT PATCH DELETE ", " "+method.Sel.Name+" ") {
			return true
		}
		last, ok := call.Args[len(call.Args)-1].(*ast.SelectorExpr)
		if !ok {
			return true
		}
		once := false
		for _, arg := range call.Args[1:] {
			if id, ok := arg.(*ast.Ident); ok && (id.Name == "once" || id.Name == "onceAtomic") {
				once = true
			}
		}
		if seen, twice := writes[last.Sel.Name]; twice && seen != once {
			t.Errorf("%s is mounted both with and without the middleware", last.Sel.Name)
		}
		writes[last.Sel.Name] = once
		return true
	})
	return writes
}
