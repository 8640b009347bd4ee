package tests

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The API's walk-through (docs/api.md) is run as written, so it cannot drift
// from the server: its commands, in order, against a fresh server, each
// output compared with the one shown under it, ignoring ids, dates, tokens
// and cursors (and Date, Content-Length and the security headers, which the
// page leaves out).
func TestAPIWalkThrough(t *testing.T) {
	needShellTools(t)
	readme, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := walkThrough(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	const base = "BASE=http://localhost:8080\n"
	if !strings.HasPrefix(steps[0].command, base) {
		t.Fatalf("the walk-through does not begin with %q", base)
	}
	var script strings.Builder
	script.WriteString("BASE=" + e.url + "\n" + strings.TrimPrefix(steps[0].command, base))
	for i := range steps {
		if i > 0 {
			script.WriteString(steps[i].command)
		}
		fmt.Fprintf(&script, "\nprintf '\\n%s\\n'\n", stepEnd(i))
	}
	cmd := exec.Command("sh", "-c", script.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walk-through failed: %v\n%s", err, stderr.String())
	}
	out := strings.ReplaceAll(stdout.String(), "\r", "")
	for i, step := range steps {
		got, rest, found := strings.Cut(out, "\n"+stepEnd(i)+"\n")
		if !found {
			t.Fatalf("step %d (docs/api.md line %d) did not finish:\n%s\n%s", i+1, step.line, out, stderr.String())
		}
		out = rest
		if err := sameOutput(step.output, got); err != nil {
			t.Errorf("docs/api.md line %d:\n%s\n%v\n--- shown:\n%s\n--- got:\n%s", step.line, step.command, err, step.output, got)
		}
	}
}

func stepEnd(i int) string { return fmt.Sprintf("@@@ end of step %d @@@", i+1) }

// step is one command block of the walk-through and the output block under it.
type step struct {
	command, output string
	line            int
}

// walkThrough reads the "## Walk-through" section: each ```sh block must
// be followed by the plain ``` block of its output, and every output block
// must follow a command.
func walkThrough(readme string) ([]step, error) {
	_, section, found := strings.Cut(readme, "\n## Walk-through\n")
	if !found {
		return nil, fmt.Errorf("docs/api.md has no Walk-through section")
	}
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	startLine := strings.Count(readme[:strings.Index(readme, "\n## Walk-through\n")], "\n") + 2
	lines := strings.Split(section, "\n")
	var steps []step
	for i := 0; i < len(lines); i++ {
		fence := lines[i]
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		var body []string
		j := i + 1
		for ; j < len(lines) && lines[j] != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: unclosed code block", startLine+i)
		}
		text := strings.Join(body, "\n") + "\n"
		switch {
		case fence == "```sh":
			if len(steps) > 0 && steps[len(steps)-1].output == "" {
				return nil, fmt.Errorf("line %d: the command above has no output block", startLine+i)
			}
			steps = append(steps, step{command: text, line: startLine + i + 1})
		case fence == "```" && len(steps) > 0 && steps[len(steps)-1].output == "":
			steps[len(steps)-1].output = text
		default:
			return nil, fmt.Errorf("line %d: an output block without its command", startLine+i)
		}
		i = j
	}
	if len(steps) == 0 || steps[len(steps)-1].output == "" {
		return nil, fmt.Errorf("the walk-through has no commands, or its last has no output")
	}
	return steps, nil
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
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(readme), "\n## See a retry happen once\n")
	_, block, fenced := strings.Cut(section, "\n```sh\n")
	block, _, closed := strings.Cut(block, "\n```\n")
	const base = "BASE=http://localhost:8080;"
	if !found || !fenced || !closed || !strings.HasPrefix(block, base) {
		t.Fatalf("README.md has no replay block beginning with %q under \"See a retry happen once\"", base)
	}
	e := newEnv(t)
	cmd := exec.Command("sh", "-c", "BASE="+e.url+";"+strings.TrimPrefix(block, base))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the replay failed: %v\n%s", err, stderr.String())
	}
	wantOneOrderReplayed(t, e, stdout.String())
}

// needShellTools skips the test where the tools of the documented shell
// blocks are missing, and fails it in CI, which installs them.
func needShellTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"sh", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed: failing, CI=true", tool)
			}
			t.Skipf("%s is not installed (apt-get install curl jq); CI installs it and runs this test", tool)
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
