package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A second, independent validator of openapi.yaml: Stoplight Prism's proxy
// (pinned in package.json), run with --errors in front of a real server. The
// walk-through through the generated Go client, then the error answers it
// does not meet, all pass through it without a violation. Prism answers
// paths and methods the document does not have by itself, without asking
// the server, so those are left to the contract checker (outsideAnswer).
func TestPrismFindsNoViolation(t *testing.T) {
	e := newEnv(t)
	lies := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Lie") == "" {
			e.server.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"products":[{"id":"not-a-uuid"}],"extra":1}`)
	}))
	t.Cleanup(lies.Close)
	doer := &http.Client{Transport: prismTransport{next: http.DefaultTransport}, Timeout: 30 * time.Second}
	base := startPrism(t, lies.URL)

	// The check can fail: an answer that breaks the document is caught.
	lie, _ := http.NewRequest("GET", base+"/api/v1/products", nil)
	lie.Header.Set("X-Test-Lie", "1")
	if _, err := doer.Do(lie); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Fatalf("prism let an undocumented field through: %v", err)
	}

	walked := walkThroughWithGoClient(t, e, base, doer, "prism@example.com")
	creds := `{"email":"prism@example.com","password":"correct horse"}`
	cases := []struct {
		name, method, path, token, accept, body string
		keyed                                   bool
		status                                  int
	}{
		{"email taken", "POST", "/api/v1/users", "", "", creds, false, 409},
		{"bad credentials", "POST", "/api/v1/tokens", "", "", `{"email":"prism@example.com","password":"wrong horse"}`, false, 401},
		{"unknown token", "GET", "/api/v1/me", "shp_" + strings.Repeat("x", 43), "", "", false, 401},
		{"me", "GET", "/api/v1/me", walked.token, "", "", false, 200},
		{"cursor not from a listing", "GET", "/api/v1/orders?after=garbage", walked.token, "", "", false, 400},
		{"already paid", "POST", "/api/v1/orders/" + walked.paid + "/payments", walked.token, "", payBody("pm_card_visa"), true, 409},
		{"provider unavailable", "POST", "/api/v1/orders/" + walked.declined + "/payments", walked.token, "", payBody("pm_card_unavailable"), true, 502},
		{"someone's payment", "GET", "/api/v1/orders/" + walked.paid + "/payments/" + uuid.NewString(), walked.token, "", "", false, 404},
		{"keys", "GET", "/api/v1/idempotency-keys?limit=2", walked.token, "", "", false, 200},
		{"problem page", "GET", "/problems/idempotency-key-reused", "", "text/html", "", false, 200},
		{"problem index", "GET", "/problems", "", "text/html", "", false, 200},
		{"unknown problem, as a problem", "GET", "/problems/nothing", "", "", "", false, 404},
		{"unknown problem, as a page", "GET", "/problems/nothing", "", "text/html", "", false, 404},
		{"reference", "GET", "/docs/api", "", "", "", false, 200},
		{"document as JSON", "GET", "/openapi.json", "", "", "", false, 200},
		{"document as YAML", "GET", "/openapi.yaml", "", "", "", false, 200},
		{"alive", "GET", "/healthz", "", "", "", false, 200},
		{"ready", "GET", "/readyz", "", "", "", false, 200},
		{"metrics", "GET", "/metrics", "", "", "", false, 200},
		{"revoke", "DELETE", "/api/v1/tokens/current", walked.token, "", "", false, 204},
		{"revoked token", "GET", "/api/v1/me", walked.token, "", "", false, 401},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		must(t, err)
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		if tc.keyed {
			req.Header.Set("Idempotency-Key", uuid.NewString())
		}
		resp, err := doer.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s %s answered %d, want %d", tc.name, tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
}

// prismTransport fails a request that Prism found in breach of the
// document: it says so in an sl-violations header, or (with --errors)
// answers a problem of its own instead of the server's answer.
type prismTransport struct{ next http.RoundTripper }

func (p prismTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if v := resp.Header.Get("Sl-Violations"); v != "" {
		return nil, fmt.Errorf("prism: %s %s answered %d with violations %s", req.Method, req.URL.Path, resp.StatusCode, v)
	}
	if bytes.Contains(body, []byte(`"type":"https://stoplight.io/prism/errors#`)) {
		return nil, fmt.Errorf("prism: %s %s: prism answered for the server: %.1000s", req.Method, req.URL.Path, body)
	}
	return resp, nil
}

// startPrism runs Prism's proxy on 127.0.0.1 in front of upstream until the
// test ends, and returns its URL. Outside CI a machine without Node.js or
// node_modules skips the test, saying how to get them; with CI=true it fails.
func startPrism(t *testing.T, upstream string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("Node.js is not installed (apt-get install npm): failing, CI=true")
		}
		t.Skip("Node.js is not installed (apt-get install npm; npm ci --no-audit --no-fund at the repository root); CI installs it and runs this test")
	}
	prism := devTool(t, "@stoplight/prism-cli/dist/index.js")
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := listener.Addr().(*net.TCPAddr).Port
	listener.Close()
	logPath := filepath.Join(t.TempDir(), "prism.log")
	logFile, err := os.Create(logPath)
	must(t, err)
	cmd := exec.Command("node", prism, "proxy", filepath.Join("..", "openapi", "openapi.yaml"), upstream,
		"--errors", "--host", "127.0.0.1", "--port", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logFile.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("prism's log:\n%s", out)
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return base
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("prism did not listen on %s within a minute", base)
	return ""
}
