package handlers

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/openapi"
	"github.com/shop/shop/payments"
)

// Every list of the routes that take an idempotency key is the router's:
// docs/idempotency.md's table, with each route's mode; docs/api.md's
// tables, which name every route, the key column filled in for exactly the
// idempotent ones; the OpenAPI document's introduction and its operations
// that take the Idempotency-Key header; and the /problems page.
func TestDocsNameEveryIdempotentRoute(t *testing.T) {
	all, modes := mountedRoutes(t)
	api := map[string]string{}
	for route, mode := range modes {
		if strings.Contains(route, " /api/") {
			api[route] = mode
		}
	}
	if len(modes) < 9 || len(api) < 4 {
		t.Fatalf("the router mounts the middleware on %d routes, %d of the API: %v", len(modes), len(api), modes)
	}

	idem := read(t, "../docs/idempotency.md")
	table := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z]+ /[^`]*)` \\|[^|\n]*\\| (atomic|two-phase) \\|$").FindAllStringSubmatch(idem, -1) {
		table[m[1]] = m[2]
	}
	sameRoutes(t, "docs/idempotency.md's table of routes and modes", table, modes)

	named, endpoints, keyed := apiTables(t, read(t, "../docs/api.md"))
	delete(all, "GET /static/{file}") // the site's files, not an endpoint
	sameRoutes(t, "docs/api.md's tables", named, all)
	for route := range endpoints {
		if _, ok := modes[route]; ok {
			endpoints[route] = "a key"
		}
	}
	sameRoutes(t, "docs/api.md's endpoint table's key column", keyed, endpoints)

	var doc struct {
		Info  struct{ Description string }
		Paths map[string]map[string]struct {
			Parameters []struct {
				Ref string `json:"$ref"`
			}
		}
	}
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	_, intro, _ := strings.Cut(doc.Info.Description, "**Exactly once.**")
	intro, _, _ = strings.Cut(intro, "\n\n")
	sameRoutes(t, "the OpenAPI introduction", codeRoutes(intro, "`"), routesOf(api))
	withKey := map[string]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for _, p := range op.Parameters {
				if p.Ref == "#/components/parameters/IdempotencyKeyHeader" || p.Ref == "#/components/parameters/OptionalIdempotencyKeyHeader" {
					withKey[strings.ToUpper(method)+" "+path] = ""
				}
			}
		}
	}
	sameRoutes(t, "the OpenAPI operations that take Idempotency-Key", withKey, routesOf(api))

	_, which, _ := strings.Cut(read(t, "../templates/problems.html"), "<dt>Which requests</dt>")
	which, _, _ = strings.Cut(which, "</dd>")
	sameRoutes(t, "the /problems page", codeRoutes(which, "<code>"), routesOf(modes))
}

// Sentinels for the idempotency middleware's two modes, found by their
// code in each route's chain.
func twoPhaseMarker(*gin.Context) {}

func atomicMarker(c *gin.Context) { c.Next() }

// mountedRoutes is every route of the router, as "POST /orders/{id}/payments",
// and the mode of each route that routes() mounts the middleware on. Gin
// lists a route's last handler only, so its trees are read for the whole
// chain; that they hold every route Routes() lists shows they were read
// right.
func mountedRoutes(t *testing.T) (map[string]string, map[string]string) {
	db := testkit.NewDB(t)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	s := NewServer(Deps{DB: db, Payments: billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db}}), StripeWebhookSecret: "whsec_test"})
	r := s.routes(twoPhaseMarker, atomicMarker)
	markers := map[uintptr]string{reflect.ValueOf(twoPhaseMarker).Pointer(): "two-phase", reflect.ValueOf(atomicMarker).Pointer(): "atomic"}
	all, modes := map[string]string{}, map[string]string{}
	var walk func(method string, n reflect.Value)
	walk = func(method string, n reflect.Value) {
		n = n.Elem()
		if chain := n.FieldByName("handlers"); chain.Len() > 0 {
			route := method + " " + openAPIPath(n.FieldByName("fullPath").String())
			all[route] = ""
			for i := range chain.Len() {
				if mode, ok := markers[chain.Index(i).Pointer()]; ok {
					modes[route] = mode
				}
			}
		}
		children := n.FieldByName("children")
		for i := range children.Len() {
			walk(method, children.Index(i))
		}
	}
	trees := reflect.ValueOf(r).Elem().FieldByName("trees")
	for i := range trees.Len() {
		walk(trees.Index(i).FieldByName("method").String(), trees.Index(i).FieldByName("root"))
	}
	listed := map[string]string{}
	for _, route := range r.Routes() {
		listed[route.Method+" "+openAPIPath(route.Path)] = ""
	}
	sameRoutes(t, "the routes read from gin's trees", all, listed)
	return all, modes
}

var ginParam = regexp.MustCompile(`[:*]([a-z_]+)`)

// openAPIPath writes gin's /orders/:id as the docs do, /orders/{id}.
func openAPIPath(path string) string { return ginParam.ReplaceAllString(path, "{$1}") }

// apiTables reads the routes docs/api.md's tables name in their first
// column ("`GET/POST /login`", "`GET /api/v1/orders?limit=&after=`"); those
// of its endpoint table, the one with an idempotency key column; and
// whether that column is filled in ("a key") or not ("").
func apiTables(t *testing.T, doc string) (named, endpoints, keyed map[string]string) {
	named, endpoints, keyed = map[string]string{}, map[string]string{}, map[string]string{}
	for _, row := range regexp.MustCompile("(?m)^\\| `.*\\|$").FindAllString(doc, -1) {
		cells := strings.Split(row, " | ")
		for route := range codeRoutes(cells[0], "`") {
			named[route] = ""
			if len(cells) == 4 {
				endpoints[route], keyed[route] = "", ""
				if cells[2] != "–" {
					keyed[route] = "a key"
				}
			}
		}
	}
	if len(named) < 25 || len(endpoints) < 15 {
		t.Fatalf("docs/api.md's tables name %d routes, %d of them endpoints", len(named), len(endpoints))
	}
	return named, endpoints, keyed
}

// codeRoutes is the routes named in code spans opened by open: "POST
// /orders", "GET/POST /login" (two), without a query.
func codeRoutes(text, open string) map[string]string {
	routes := map[string]string{}
	span := regexp.MustCompile(regexp.QuoteMeta(open) + `((?:GET|POST|PUT|PATCH|DELETE)(?:/(?:GET|POST|PUT|PATCH|DELETE))*) (/[^?\x60<\s]*)`)
	for _, m := range span.FindAllStringSubmatch(text, -1) {
		for method := range strings.SplitSeq(m[1], "/") {
			routes[method+" "+m[2]] = ""
		}
	}
	return routes
}

// sameRoutes fails unless got names the routes of want, with the same
// values.
func sameRoutes(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	for _, route := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[route]; !ok {
			t.Errorf("%s: %s is missing", what, route)
		} else if g != want[route] {
			t.Errorf("%s: %s is %q, want %q", what, route, g, want[route])
		}
	}
	for _, route := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[route]; !ok {
			t.Errorf("%s names %s, which the router does not have (or not so)", what, route)
		}
	}
}

// routesOf is the routes of m, without their values.
func routesOf(m map[string]string) map[string]string {
	routes := map[string]string{}
	for route := range m {
		routes[route] = ""
	}
	return routes
}

func read(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
