package tests

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
)

// Every shell block of docs/api.md runs as a newcomer runs it: after the
// README's retry, in order, as printed, with bash, in a copy of the
// repository where the README's build left ./shop, against a fresh server
// on a free port. The test sets only BASE, which the first block reads,
// and DATABASE_URL, the server's own setting, read by ./shop staff add
// too. A block that exits non-zero, or where jq reports an error, fails the
// test; each output shown is compared with what its command printed,
// ignoring ids, dates, tokens and cursors (and Date, Content-Length and the
// security headers, which the page leaves out).
func TestAPIWalkThrough(t *testing.T) {
	needShellTools(t, "bash", "npm", "node", "go")
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := shellBlocks(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	steps = append([]step{{command: readmeReplay(t) + "\n", line: 0}}, steps...)
	repo := repositoryCopy(t)
	if err := os.Symlink(shopBinary(t), filepath.Join(repo, "shop")); err != nil {
		t.Fatal(err)
	}
	dbURL, port := testkit.URL(t), freePort(t)
	startShop(t, "shop", "PORT="+port, "DATABASE_URL="+dbURL)
	base := "http://localhost:" + port

	script := "set -eo pipefail\n"
	for i := range steps {
		script += steps[i].command + fmt.Sprintf("printf '\\n%s\\n'\n", stepEnd(i))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute) // npm ci and go generate, on a busy machine
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "BASE="+base, "DATABASE_URL="+dbURL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out := strings.ReplaceAll(strings.ReplaceAll(stdout.String(), "\r", ""), base, "http://localhost:8080")
	for i, step := range steps {
		got, rest, found := strings.Cut(out, "\n"+stepEnd(i)+"\n")
		if !found {
			t.Fatalf("the block at docs/api.md line %d (0: the README's) did not finish: %v\n%s\n--- printed:\n%s\n--- stderr:\n%s",
				step.line, runErr, step.command, out, stderr.String())
		}
		out = rest
		if err := sameOutput(step.output, got); step.output != "" && err != nil {
			t.Errorf("docs/api.md line %d:\n%s\n%v\n--- shown:\n%s\n--- got:\n%s", step.line, step.command, err, step.output, got)
		}
	}
	if runErr != nil || strings.Contains(stderr.String(), "jq: error") {
		t.Fatalf("the blocks: %v\n%s", runErr, stderr.String())
	}
	e := &env{t: t, db: testkit.Open(t, dbURL)}
	// ada's order, grace's four and kay (staff), then the TypeScript
	// walk-through's account and its two orders; the provider gave back
	// $2.00 and $3.00.
	users, staff, orders := e.count("users"), e.count("users", "role = ?", "staff"), e.count("orders")
	if refunds := e.count("simulated_refunds", "status = ?", "succeeded"); users != 4 || staff != 1 || orders != 7 || refunds != 2 {
		t.Fatalf("%d users (%d staff), %d orders, %d refunds; want 4 (1), 7 and 2", users, staff, orders, refunds)
	}
}

func stepEnd(i int) string { return fmt.Sprintf("@@@ end of step %d @@@", i) }

// step is one shell block and the plain block of its output under it, if
// any.
type step struct {
	command, output string
	line            int
}

// shellBlocks reads every ```sh block of a page, each with the plain ```
// block right under it, its output, if there is one; a plain block under
// anything else is an error.
func shellBlocks(doc string) ([]step, error) {
	lines := strings.Split(doc, "\n")
	var steps []step
	after := "" // the fence of the block just closed, when nothing came between
	for i := 0; i < len(lines); i++ {
		fence := lines[i]
		if !strings.HasPrefix(fence, "```") {
			if strings.TrimSpace(fence) != "" {
				after = ""
			}
			continue
		}
		var body []string
		j := i + 1
		for ; j < len(lines) && lines[j] != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: unclosed code block", i+1)
		}
		text := strings.Join(body, "\n") + "\n"
		switch {
		case fence == "```sh":
			steps = append(steps, step{command: text, line: i + 2})
		case fence == "```" && after == "```sh":
			steps[len(steps)-1].output = text
		case fence == "```":
			return nil, fmt.Errorf("line %d: an output block without its command", i+1)
		}
		after, i = fence, j
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("no shell blocks")
	}
	return steps, nil
}

// repositoryCopy is a copy of the files git tracks, as they are in the
// working tree: a fresh clone with the changes not yet committed.
func repositoryCopy(t *testing.T) string {
	t.Helper()
	listed, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(listed), "\x00"), "\x00") {
		info, err := os.Lstat(filepath.Join("..", name))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted, or not a file
		}
		data, err := os.ReadFile(filepath.Join("..", name))
		if err == nil {
			err = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), data, info.Mode().Perm())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// What varies from run to run, and how it is shown once normalised.
var variable = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<id>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`ch_[0-9a-f]{32}`), "ch_<id>"},
	{regexp.MustCompile(`shp_[A-Za-z0-9_-]{43}`), "shp_<token>"},
	{regexp.MustCompile(`after=[A-Za-z0-9_-]+`), "after=<cursor>"},
	{regexp.MustCompile(`"next_cursor":"[A-Za-z0-9_-]+"`), `"next_cursor":"<cursor>"`},
}

func normalise(s string) string {
	for _, v := range variable {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return strings.TrimSpace(s)
}

// unshownHeaders are left out of the walk-through's answers: they vary, or,
// for the security headers and the request id, come with every answer
// (docs/api.md says so).
var unshownHeaders = []string{"date", "content-length", "x-request-id",
	"content-security-policy", "x-content-type-options", "x-frame-options", "referrer-policy"}

// answer is one HTTP answer as `curl -si` prints it.
type answer struct {
	status string
	header map[string]string // lower-cased names
	body   string
}

func answers(s string) []answer {
	var out []answer
	for _, part := range strings.Split("\n"+s, "\nHTTP/")[1:] {
		head, body, _ := strings.Cut(part, "\n\n")
		lines := strings.Split(head, "\n")
		a := answer{status: "HTTP/" + strings.TrimSpace(lines[0]), header: map[string]string{}, body: normalise(body)}
		for _, l := range lines[1:] {
			if strings.TrimSpace(l) == "" {
				continue
			}
			name, value, _ := strings.Cut(l, ":")
			if name = strings.ToLower(strings.TrimSpace(name)); !slices.Contains(unshownHeaders, name) {
				a.header[name] = normalise(value)
			}
		}
		out = append(out, a)
	}
	return out
}

// sameOutput compares what the page shows with what the command printed:
// status lines and headers exactly (all of them but Date and
// Content-Length), bodies and other output piece by piece, where "…" stands
// for anything.
func sameOutput(shown, got string) error {
	if !strings.HasPrefix(shown, "HTTP/") {
		return shortened(normalise(shown), normalise(got))
	}
	want, have := answers(shown), answers(got)
	if len(want) != len(have) {
		return fmt.Errorf("%d answers shown, %d got", len(want), len(have))
	}
	for i := range want {
		if want[i].status != have[i].status {
			return fmt.Errorf("status %q shown, %q got", want[i].status, have[i].status)
		}
		for _, n := range slices.Sorted(maps.Keys(have[i].header)) {
			if w, ok := want[i].header[n]; !ok || w != have[i].header[n] {
				return fmt.Errorf("header %s: %q shown, %q got", n, w, have[i].header[n])
			}
		}
		if len(want[i].header) != len(have[i].header) {
			return fmt.Errorf("headers shown %v, got %v", want[i].header, have[i].header)
		}
		if err := shortened(want[i].body, have[i].body); err != nil {
			return err
		}
	}
	return nil
}

// shortened says whether got is shown, where each "…" of shown stands for
// anything.
func shortened(shown, got string) error {
	pieces := strings.Split(shown, "…")
	for i := range pieces {
		pieces[i] = strings.TrimSpace(pieces[i])
	}
	first, last := pieces[0], pieces[len(pieces)-1]
	if len(pieces) == 1 {
		if shown != got {
			return fmt.Errorf("%q shown, %q printed", shown, got)
		}
		return nil
	}
	if !strings.HasPrefix(got, first) {
		return fmt.Errorf("the output does not begin with %q", first)
	}
	rest := got[len(first):]
	for _, p := range pieces[1 : len(pieces)-1] {
		at := strings.Index(rest, p)
		if at < 0 {
			return fmt.Errorf("%q is not in the output, in its place", p)
		}
		rest = rest[at+len(p):]
	}
	if !strings.HasSuffix(rest, last) {
		return fmt.Errorf("the output does not end with %q", last)
	}
	return nil
}

// The README's replay runs as written against a fresh server: the same
// order sent twice with one key is one order, the second answer the first
// one replayed.
func TestREADMEReplay(t *testing.T) {
	needShellTools(t)
	e := newEnv(t)
	cmd := exec.Command("sh", "-c", readmeReplay(t))
	cmd.Env = append(os.Environ(), "BASE="+e.url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the replay failed: %v\n%s", err, stderr.String())
	}
	wantOneOrderReplayed(t, e, stdout.String())
}

// readmeReplay is the README's block under "See a retry happen once",
// which reads BASE from the environment.
func readmeReplay(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(readme), "\n## See a retry happen once\n")
	_, block, fenced := strings.Cut(section, "\n```sh\n")
	block, _, closed := strings.Cut(block, "\n```\n")
	const base = "BASE=${BASE:-http://localhost:8080};"
	if !found || !fenced || !closed || !strings.HasPrefix(block, base) {
		t.Fatalf("README.md has no replay block beginning with %q under \"See a retry happen once\"", base)
	}
	return block
}

// needShellTools skips the test where the tools of the documented shell
// blocks are missing, and fails it in CI, which installs them.
func needShellTools(t *testing.T, more ...string) {
	t.Helper()
	for _, tool := range append([]string{"sh", "curl", "jq"}, more...) {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed: failing, CI=true", tool)
			}
			t.Skipf("%s is not installed (apt-get install curl jq npm); CI installs it and runs this test", tool)
		}
	}
}

// wantOneOrderReplayed checks what a documented block that sends one order
// twice printed, `grep`ped to its status, Location and Idempotent-Replayed
// lines, and the database: one order, the second answer the first one
// replayed.
func wantOneOrderReplayed(t *testing.T, e *env, printed string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(printed, "\r", "")), "\n")
	if len(lines) != 5 || lines[0] != "HTTP/1.1 201 Created" || lines[2] != lines[0] ||
		!strings.HasPrefix(lines[1], "Location: /api/v1/orders/") || lines[4] != lines[1] || lines[3] != "Idempotent-Replayed: true" {
		t.Fatalf("the block printed:\n%s\nwant 201 and a Location twice, the second marked replayed", printed)
	}
	if orders, keys := e.count("orders"), e.count("idempotency_keys", "state = ?", "completed"); orders != 1 || keys != 1 {
		t.Fatalf("%d orders and %d completed keys, want 1 and 1", orders, keys)
	}
}

// The README's block and the API's walk-through sign up different users,
// so that a newcomer who runs one and then the other against the same
// server does not see the second fail with 409.
func TestREADMEAndWalkThroughSignUpDifferentUsers(t *testing.T) {
	emails := regexp.MustCompile(`"email":"([^"]+)"`)
	signedUp := func(path string) map[string]bool {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, m := range emails.FindAllStringSubmatch(string(doc), -1) {
			found[m[1]] = true
		}
		if len(found) == 0 {
			t.Fatalf("%s signs up nobody", path)
		}
		return found
	}
	walkThrough := signedUp("../docs/api.md")
	for email := range signedUp("../README.md") {
		if walkThrough[email] {
			t.Fatalf("README.md and docs/api.md both sign up %s", email)
		}
	}
}
