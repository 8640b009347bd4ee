package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The TypeScript client generated from openapi.yaml (clients/ts: types by
// openapi-typescript, calls by openapi-fetch), compiled with tsc --strict,
// walks through the API (clients/ts/test/walkthrough.test.ts) against a
// running server, behind a proxy that checks every request and answer
// against the document: twice, as a developer would, each run with an
// account and keys of its own; then once more with SHOP_EMAIL naming an
// account that exists, which fails saying so.
func TestGeneratedTypeScriptClientWalkThrough(t *testing.T) {
	dir := typeScriptClient(t)
	e := newEnv(t)
	node(t, dir, nil, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json", "--strict")
	shop := "SHOP_URL=" + contractProxy(t, e.url)
	for range 2 {
		node(t, dir, []string{shop}, "--test", "dist/test/")
	}
	var emails []string
	if err := e.db.Table("users").Order("email").Pluck("email", &emails).Error; err != nil || len(emails) != 2 || emails[0] == emails[1] {
		t.Fatalf("the runs signed up %q (%v), want two accounts", emails, err)
	}
	if orders, payments, charged := e.count("orders"), e.count("payments"), e.charges(); orders != 4 || payments != 4 || charged != 2 {
		t.Fatalf("wrote %d orders, %d payments, %d charges; want 4, 4 (two declined) and 2", orders, payments, charged)
	}

	out, err := nodeRun(dir, []string{shop, "SHOP_EMAIL=" + emails[0]}, "--test", "dist/test/")
	if err == nil || !strings.Contains(string(out), "that account exists on this server already: leave SHOP_EMAIL out") {
		t.Fatalf("a run with a taken SHOP_EMAIL: %v\n%s", err, out)
	}
	if users := e.count("users"); users != 2 {
		t.Fatalf("%d users after the refused run, want 2", users)
	}
}

// typeScriptClient is clients/ts with its packages installed (npm ci there;
// the versions are pinned in its package.json). Outside CI a machine without
// them skips the test, saying how to get them; with CI=true it fails.
func typeScriptClient(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "clients", "ts"))
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	_, tscErr := os.Stat(filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"))
	if nodeErr == nil && tscErr == nil {
		return dir
	}
	const how = "Node.js and clients/ts/node_modules are needed (apt-get install npm; cd clients/ts && npm ci --no-audit --no-fund)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: failing, CI=true", how)
	}
	t.Skipf("%s; CI installs them and runs this test", how)
	return ""
}

// node runs a Node.js script in dir, bounded in time, and fails the test
// with its output if it fails.
func node(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	if out, err := nodeRun(dir, env, args...); err != nil {
		t.Fatalf("node %v: %v\n%s", args, err, out)
	}
}

// nodeRun runs a Node.js script in dir, bounded in time, and returns its
// output.
func nodeRun(dir string, env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// contractProxy serves target through the contract checker, for clients
// that are not written in Go: a request or an answer that breaks the
// document fails the test.
func contractProxy(t *testing.T, target string) string {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(to) },
		Transport: contractTransport{next: http.DefaultTransport},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t.Errorf("%s %s: %v", r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}
