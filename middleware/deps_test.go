package middleware

import (
	"go/parser"
	"go/token"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The shop's module: no package of it may be the middleware's dependency.
const shopModule = "github.com/shop/shop/"

// The middleware stands alone: it imports no package of the shop, directly
// or through another, so that it can be lifted out with its table and its
// refusals and nothing of users, orders or payments.
func TestTheMiddlewareImportsNoPackageOfTheShop(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 || deps[len(deps)-1] != shopModule+"middleware" {
		t.Fatalf("go list -deps listed %v, want the middleware's dependencies and then the middleware", deps)
	}
	for _, dep := range deps[:len(deps)-1] {
		if strings.HasPrefix(dep, shopModule) {
			t.Errorf("the middleware depends on %s", dep)
		}
	}
}

// The examples mount the middleware in a bare Gin app, on a database of
// their own: they use the middleware, and nothing else of the shop.
func TestTheExamplesUseNothingElseOfTheShop(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "example_test.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range f.Imports {
		path, _ := strconv.Unquote(spec.Path.Value)
		if strings.HasPrefix(path, shopModule) && path != shopModule+"middleware" {
			t.Errorf("example_test.go imports %s", path)
		}
	}
}
