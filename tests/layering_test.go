package tests

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// shop is the module's path; a package is named here by its folder ("."
// for the root).
const shop = "github.com/shop/shop"

// allowedImports is the package graph, written once: for each production
// package, the packages of the shop it may import directly (its production
// files; tests may import more). docs/architecture.md shows it, and
// TestArchitectureShowsTheImportTable holds the two equal. That the
// middleware imports nothing of the shop even indirectly is
// middleware/deps_test.go's.
var allowedImports = map[string][]string{
	".":                {"accounts", "admin", "billing", "config", "database", "handlers", "httpkit", "internal/tracing", "jobs", "orders", "payments"},
	"config":           {"database", "middleware", "notify"},
	"admin":            {"accounts", "database", "models", "orders"},
	"jobs":             {"accounts", "billing", "config", "internal/loop", "notify", "orders", "outbox", "outbox/publish"},
	"handlers":         {"accounts", "audit", "billing", "database", "httpkit", "internal/tracing", "middleware", "models", "notify", "orders", "outbox", "payments", "problem", "static", "templates", "handlers/views"},
	"handlers/views":   {"audit", "middleware", "models", "orders", "outbox", "payments", "problem", "templates"},
	"httpkit":          {"database", "middleware", "openapi"},
	"middleware":       {},
	"billing":          {"accounts", "audit", "models", "orders", "outbox", "payments", "problem"},
	"orders":           {"accounts", "audit", "database", "models", "outbox", "problem"},
	"accounts":         {"models"},
	"audit":            {"models"},
	"database":         {},
	"models":           {"problem"},
	"payments":         {"internal/tracing", "models"},
	"notify":           {"database", "models", "outbox"},
	"outbox":           {},
	"outbox/publish":   {"outbox"},
	"problem":          {},
	"openapi":          {},
	"static":           {},
	"templates":        {"models", "payments"},
	"internal/tracing": {},
	"internal/loop":    {},
	"client":           {"clients/go"},
}

// features are the domain's packages by feature.
var features = []string{"accounts", "audit", "orders", "billing"}

// never are the rules the table keeps: no entry of allowedImports may
// widen it past them.
var never = []struct {
	from, to []string // nil: every package
	why      string
}{
	{[]string{"models", "database"}, append(slices.Clone(features), "handlers", "middleware", "jobs", "config", "admin"), "the rows and the database know no feature"},
	{[]string{"middleware", "problem", "outbox", "database"}, nil, "imports nothing of the shop"},
	{features, []string{"handlers", "middleware", "jobs", "config", "admin"}, "a feature knows no HTTP, no background loop and no settings table: it is handed what it needs"},
	{nil, []string{"handlers"}, "only main mounts the HTTP surface"},
	{nil, []string{"jobs", "admin"}, "only main starts the jobs and runs the subcommands"},
}

// production reports whether a package of `go list ./...` is the shop's
// production code, which the layout and the table cover: not the tests,
// the generated clients, the tests' kit or the scripts.
func production(folder string) bool {
	for _, p := range []string{"tests", "clients", "internal/testkit", "internal/testreport", "scripts"} {
		if folder == p || strings.HasPrefix(folder, p+"/") {
			return false
		}
	}
	return true
}

func folderOf(path string) string {
	if path == shop {
		return "."
	}
	return strings.TrimPrefix(path, shop+"/")
}

// shopGraph is each package's direct imports of the shop, as `go list` sees
// its production files.
func shopGraph(t *testing.T) map[string][]string {
	t.Helper()
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedImports, Dir: ".."}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	graph := map[string][]string{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("load %s: %v", p.PkgPath, p.Errors)
		}
		from := folderOf(p.PkgPath)
		graph[from] = []string{}
		for path := range p.Imports {
			if path == shop || strings.HasPrefix(path, shop+"/") {
				graph[from] = append(graph[from], folderOf(path))
			}
		}
		sort.Strings(graph[from])
	}
	if len(graph) < 20 {
		t.Fatalf("go list ./... found %d packages", len(graph))
	}
	return graph
}

// graphBreaks are the imports of graph that allowed does not allow, as
// "from -> to", and the production packages allowed does not know.
func graphBreaks(graph, allowed map[string][]string) []string {
	var breaks []string
	for from, imports := range graph {
		if !production(from) {
			continue
		}
		may, known := allowed[from]
		if !known {
			breaks = append(breaks, from+" is not in the table")
			continue
		}
		for _, to := range imports {
			if !slices.Contains(may, to) {
				breaks = append(breaks, from+" -> "+to)
			}
		}
	}
	sort.Strings(breaks)
	return breaks
}

// tableBreaks are the entries of allowed that widen a rule of never.
func tableBreaks(allowed map[string][]string) []string {
	var breaks []string
	for from, may := range allowed {
		for _, rule := range never {
			if rule.from != nil && !slices.Contains(rule.from, from) {
				continue
			}
			for _, to := range may {
				if (rule.to == nil || slices.Contains(rule.to, to)) && !(from == "." && rule.from == nil) {
					breaks = append(breaks, from+" -> "+to+": "+rule.why)
				}
			}
		}
	}
	sort.Strings(breaks)
	return breaks
}

// The package graph is the table's: every import of a production package of
// the shop is one the table allows; and the
// table itself keeps the rules (models and database know no feature, the
// middleware imports nothing of the shop, only main imports handlers,
// jobs and admin, a feature never imports HTTP, jobs or settings).
func TestLayeringHoldsThePackageGraph(t *testing.T) {
	for _, b := range tableBreaks(allowedImports) {
		t.Errorf("the table breaks a rule: %s", b)
	}
	graph := shopGraph(t)
	for from := range allowedImports {
		if _, ok := graph[from]; !ok {
			t.Errorf("the table names %s, which go list ./... does not", from)
		}
	}
	for _, b := range graphBreaks(graph, allowedImports) {
		t.Errorf("%s: the table does not allow it (tests/layering_test.go allowedImports)", b)
	}
}

// The check is not blind: an import the table does not allow, a package it
// does not know and a table that widens a rule are each reported.
func TestLayeringCheckCatchesABreak(t *testing.T) {
	graph := map[string][]string{
		"orders":      {"models", "handlers"},
		"newfeature":  {"models"},
		"tests/load":  {"handlers"},
		"clients/go":  {},
		"models":      {"problem"},
		"middleware":  {},
		"handlers":    {"orders"},
		"internal/x":  {},
		"outbox":      {},
		"scripts/foo": {"handlers"},
	}
	allowed := map[string][]string{
		"orders": {"models"}, "models": {"problem"}, "middleware": {}, "handlers": {"orders"}, "internal/x": {}, "outbox": {},
	}
	want := []string{"newfeature is not in the table", "orders -> handlers"}
	if got := graphBreaks(graph, allowed); !slices.Equal(got, want) {
		t.Errorf("graphBreaks = %q, want %q", got, want)
	}
	wide := map[string][]string{"models": {"orders"}, "problem": {"database"}, "billing": {"middleware"}, "jobs": {"handlers"}, ".": {"handlers", "jobs"}}
	got := tableBreaks(wide)
	for _, prefix := range []string{"billing -> middleware", "problem -> database", "jobs -> handlers", "models -> orders"} {
		if !slices.ContainsFunc(got, func(b string) bool { return strings.HasPrefix(b, prefix+":") }) {
			t.Errorf("tableBreaks missed %s: %q", prefix, got)
		}
	}
	if slices.ContainsFunc(got, func(b string) bool { return strings.HasPrefix(b, ". ->") }) {
		t.Errorf("tableBreaks refused main: %q", got)
	}
}

// section is the text of docs/architecture.md under the heading title, up
// to the next heading of the same level.
func section(t *testing.T, title string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, s, found := strings.Cut(string(doc), "\n"+title+"\n")
	if !found {
		t.Fatalf("docs/architecture.md has no %q", title)
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

var (
	tableRow = regexp.MustCompile("(?m)^\\| `([^`]+)`[^|]*\\|(.*)\\|$")
	codeName = regexp.MustCompile("`([^`]+)`")
)

// rows are a Markdown table's rows whose first cell starts with a name in
// backticks, by that name (a folder's trailing slash dropped), each with
// its other cells.
func rows(t *testing.T, text string) map[string]string {
	t.Helper()
	found := map[string]string{}
	for _, m := range tableRow.FindAllStringSubmatch(text, -1) {
		name := strings.TrimSuffix(m[1], "/")
		if _, twice := found[name]; twice {
			t.Errorf("docs/architecture.md lists %s twice", name)
		}
		found[name] = m[2]
	}
	return found
}

// The layout of docs/architecture.md is `go list ./...`'s: every package it
// lists exists, every production package is listed, with its one job; and
// the other folders it lists exist.
func TestArchitectureLayoutIsGoList(t *testing.T) {
	layout := section(t, "## Layout")
	pkgsTable, others, found := strings.Cut(layout, "\nOther folders")
	if !found {
		t.Fatal("docs/architecture.md's layout has no \"Other folders\" table after its packages")
	}
	listed := rows(t, pkgsTable)
	graph := shopGraph(t)
	for name, job := range listed {
		if _, ok := graph[name]; !ok {
			t.Errorf("the layout lists the package %s, which go list ./... does not", name)
		}
		if len(strings.Fields(job)) < 4 {
			t.Errorf("the layout gives %s no job: %q", name, job)
		}
	}
	for name := range graph {
		if _, ok := listed[name]; production(name) && !ok {
			t.Errorf("go list ./... has %s, which the layout does not list", name)
		}
	}
	other := rows(t, others)
	if len(other) < 5 {
		t.Fatalf("the layout lists %d other folders", len(other))
	}
	for name := range other {
		if _, err := os.Stat("../" + name); err != nil {
			t.Errorf("the layout lists %s: %v", name, err)
		}
	}
}

// docs/architecture.md shows the table of allowedImports, as it is.
func TestArchitectureShowsTheImportTable(t *testing.T) {
	shown := rows(t, section(t, "## Who may import whom"))
	for from, may := range allowedImports {
		cell, ok := shown[from]
		if !ok {
			t.Errorf("docs/architecture.md does not show what %s may import", from)
			continue
		}
		var got []string
		for _, m := range codeName.FindAllStringSubmatch(cell, -1) {
			got = append(got, strings.TrimSuffix(m[1], "/"))
		}
		want := slices.Sorted(slices.Values(may))
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Errorf("docs/architecture.md: %s may import %q; the test's table says %q", from, got, want)
		}
	}
	for from := range shown {
		if _, ok := allowedImports[from]; !ok {
			t.Errorf("docs/architecture.md shows %s, which the test's table does not have", from)
		}
	}
}

// Every production package says its one job in the first sentence of its
// package documentation: `go doc` shows it first.
func TestEveryPackageSaysItsJob(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Doc}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, rest, _ := strings.Cut(line, "\t")
		name, synopsis, _ := strings.Cut(rest, "\t")
		if !production(folderOf(path)) {
			continue
		}
		n++
		opening := "Package " + name + " "
		if name == "main" {
			opening = "Command "
		}
		if !strings.HasPrefix(synopsis, opening) || !strings.HasSuffix(synopsis, ".") || len(strings.Fields(synopsis)) < 6 {
			t.Errorf("%s: go doc's first sentence is %q; want %q and its one job", folderOf(path), synopsis, opening+"…")
		}
	}
	if n < 20 {
		t.Fatalf("go list found %d production packages", n)
	}
}
