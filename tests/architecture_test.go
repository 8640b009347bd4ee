package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The walks of docs/architecture.md — an order, a payment and a refund, hop
// by hop —
// are held to the code: at most 10 hops each; every function, method and
// file they name exists where they say (a file names what it declares or
// calls; pkg.Name is declared in pkg; Type.method in the package of the
// last file named); and, between the handler's call and its render,
// nothing is in handlers/.
func TestArchitectureWalksAreTrue(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"## One order, hop by hop", "## One payment, hop by hop", "## One refund, hop by hop"} {
		hops := walk(t, string(doc), title)
		if len(hops) < 6 || len(hops) > 10 {
			t.Errorf("%s: %d hops; want at most 10 (and the walk found)", title, len(hops))
		}
		dir := ""
		for i, hop := range hops {
			for _, pair := range filePair.FindAllStringSubmatch(hop, -1) {
				if !mentions(t, []string{filepath.Join("..", pair[1])}, pair[2]) {
					t.Errorf("%s, hop %d: %s neither declares nor calls %s", title, i+1, pair[1], pair[2])
				}
			}
			for _, tok := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(hop, -1) {
				dir = checkToken(t, title, i+1, tok[1], dir)
			}
			if i >= 3 && i < len(hops)-1 && strings.Contains(hop, "`handlers/") {
				t.Errorf("%s, hop %d names handlers/ between the handler's call and its render: %s", title, i+1, hop)
			}
		}
	}
}

// filePair is a file named with what it declares or calls: `f.go` `name`.
var filePair = regexp.MustCompile("`([\\w/]+\\.go)`:? `(\\w+)`")

// walk is the numbered hops of the section titled title.
func walk(t *testing.T, doc, title string) []string {
	t.Helper()
	start := strings.Index(doc, title)
	if start < 0 {
		t.Fatalf("docs/architecture.md has no %q", title)
	}
	section := doc[start+len(title):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var hops []string
	for _, line := range strings.Split(section, "\n") {
		switch {
		case regexp.MustCompile(`^\d+\. `).MatchString(line):
			hops = append(hops, line)
		case len(hops) > 0 && strings.HasPrefix(line, "   "):
			hops[len(hops)-1] += " " + strings.TrimSpace(line)
		case strings.TrimSpace(line) == "" && len(hops) > 0:
			return hops
		}
	}
	return hops
}

var identTok = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$`)

// checkToken checks one code name of a hop, given the folder of the last
// file named, and returns the folder for the next.
func checkToken(t *testing.T, title string, hop int, tok, dir string) string {
	t.Helper()
	if strings.HasSuffix(tok, ".go") {
		path := tok
		if !strings.Contains(tok, "/") {
			path = filepath.Join(filepath.Dir(dir), tok) // beside the file named last
		}
		if _, err := os.Stat(filepath.Join("..", path)); err != nil {
			t.Errorf("%s, hop %d: no file %s", title, hop, path)
		}
		return path
	}
	if !identTok.MatchString(tok) {
		return dir
	}
	recv, name, qualified := strings.Cut(tok, ".")
	switch {
	case !qualified && isPackage(tok):
		return tok + "/" // a package: names after it are its
	case !qualified:
		return dir // a bare name: checked with its file (filePair)
	case isPackage(recv):
		if !declares(t, recv, "*", name) {
			t.Errorf("%s, hop %d: package %s declares no %s", title, hop, recv, name)
		}
	default:
		if pkg := filepath.Dir(dir); !declares(t, pkg, recv, name) {
			t.Errorf("%s, hop %d: package %s declares no method %s of %s", title, hop, pkg, name, recv)
		}
	}
	return dir
}

func isPackage(name string) bool {
	info, err := os.Stat(filepath.Join("..", name))
	return err == nil && info.IsDir()
}

func parseFiles(t *testing.T, paths []string) []*ast.File {
	t.Helper()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// mentions reports whether the files use or declare the identifier name.
func mentions(t *testing.T, paths []string, name string) bool {
	found := false
	for _, f := range parseFiles(t, paths) {
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name == name {
				found = true
			}
			return !found
		})
	}
	return found
}

// declares reports whether the package in folder pkg declares a function
// name (recv empty), or a method name of the type recv (of any type, recv
// "*") — a func with that receiver, or a method of that interface.
func declares(t *testing.T, pkg, recv, name string) bool {
	paths, _ := filepath.Glob(filepath.Join("..", pkg, "*.go"))
	found := false
	for _, f := range parseFiles(t, paths) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				found = found || n.Name.Name == name && (recv == "*" || receiverName(n) == recv)
			case *ast.TypeSpec:
				if iface, ok := n.Type.(*ast.InterfaceType); ok && (recv == "*" || n.Name.Name == recv) {
					for _, m := range iface.Methods.List {
						for _, id := range m.Names {
							found = found || id.Name == name
						}
					}
				}
			}
			return !found
		})
	}
	return found
}

func receiverName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.IndexListExpr:
		return x.X.(*ast.Ident).Name
	case *ast.IndexExpr:
		return x.X.(*ast.Ident).Name
	}
	return ""
}
