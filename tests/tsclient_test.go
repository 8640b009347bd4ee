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
	"testing"
	"time"
)

// The TypeScript client generated from openapi.yaml (clients/ts: types by
// openapi-typescript, calls by openapi-fetch), compiled with tsc --strict,
// walks through the API (clients/ts/test/walkthrough.test.ts) against a
// running server, behind a proxy that checks every request and answer
// against the document.
func TestGeneratedTypeScriptClientWalkThrough(t *testing.T) {
	dir := typeScriptClient(t)
	e := newEnv(t)
	node(t, dir, nil, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json", "--strict")
	email := "ts-client@example.com"
	node(t, dir, []string{"SHOP_URL=" + contractProxy(t, e.url), "SHOP_EMAIL=" + email}, "--test", "dist/test/")

	var userID string
	if err := e.db.Table("users").Where("email = ?", email).Pluck("id", &userID).Error; err != nil || userID == "" {
		t.Fatalf("the client's account is not there: %v", err)
	}
	orders := e.count("orders", "user_id = ?", userID)
	payments := e.count("payments", "order_id IN (?)", e.db.Table("orders").Select("id").Where("user_id = ?", userID))
	if charged := e.charges(); orders != 2 || payments != 2 || charged != 1 {
		t.Fatalf("wrote %d orders, %d payments, %d charges; want 2, 2 (one declined) and 1", orders, payments, charged)
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node %v: %v\n%s", args, err, out)
	}
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
