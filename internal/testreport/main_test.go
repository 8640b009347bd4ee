package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A run where one test passes, one is skipped and one fails: the failed
// test's output is printed, the passing one's is not, and the skip is kept
// with its reason, without the file:line prefix.
func TestReadKeepsSkipsAndFailures(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestPass"}`,
		`{"Action":"output","Package":"p","Test":"TestPass","Output":"=== RUN   TestPass\n"}`,
		`{"Action":"output","Package":"p","Test":"TestPass","Output":"    x_test.go:3: quiet\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestPass"}`,
		`{"Action":"output","Package":"p","Test":"TestSkip","Output":"    x_test.go:9: Chromium is not installed (apt-get install chromium)\n"}`,
		`{"Action":"output","Package":"p","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestSkip"}`,
		`{"Action":"output","Package":"p","Test":"TestFail","Output":"    x_test.go:12: 2 orders, want 1\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestFail"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t0.01s\n"}`,
		`{"Action":"pass","Package":"q"}`,
	}, "\n")
	var out strings.Builder
	r := follow(lines(strings.NewReader(in)), nil, time.Now(), &out)
	if !r.failed || r.passed != 1 {
		t.Fatalf("failed %v, passed %d; want true, 1", r.failed, r.passed)
	}
	want := []string{"p TestSkip: Chromium is not installed (apt-get install chromium)"}
	if len(r.skipped) != 1 || r.skipped[0] != want[0] {
		t.Fatalf("skipped %q, want %q", r.skipped, want)
	}
	printed := out.String()
	if !strings.Contains(printed, "2 orders, want 1") || strings.Contains(printed, "quiet") ||
		!strings.Contains(printed, "ok  \tq") || !strings.Contains(printed, "FAIL\tp") {
		t.Fatalf("printed:\n%s", printed)
	}
}

// A scripted run, its events and the ticks of the progress clock in the
// order given: a tick is taken only once every line before it is followed,
// as follow reads both from unbuffered channels, one at a time.
type script struct {
	t     *testing.T
	in    chan string
	ticks chan time.Time
	start time.Time
	out   strings.Builder
	done  chan report
}

func newScript(t *testing.T) *script {
	s := &script{t: t, in: make(chan string), ticks: make(chan time.Time),
		start: time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC), done: make(chan report)}
	go func() { s.done <- follow(s.in, s.ticks, s.start, &s.out) }()
	return s
}

// event sends the event of test (empty: the package's own) at the given
// time into the run.
func (s *script) event(at time.Duration, action, pkg, test, output string) {
	s.in <- fmt.Sprintf(`{"Time":%q,"Action":%q,"Package":%q,"Test":%q,"Output":%q}`,
		s.start.Add(at).Format(time.RFC3339Nano), action, pkg, test, output)
}

func (s *script) tick(at time.Duration) { s.ticks <- s.start.Add(at) }

// end closes the input and returns what was printed.
func (s *script) end() (report, string) {
	close(s.in)
	r := <-s.done
	return r, s.out.String()
}

// While go test compiles, a tick says so; once packages run, each tick
// names those still running, for how long and how many of their tests have
// passed (subtests not counted), and a package's result line is printed
// the moment it finishes, ahead of a slower package started before it.
func TestProgressNamesWhatIsStillRunning(t *testing.T) {
	s := newScript(t)
	s.tick(30 * time.Second)
	s.event(40*time.Second, "start", "shop/tests", "", "")
	s.event(41*time.Second, "start", "shop/fast", "", "")
	s.event(42*time.Second, "run", "shop/tests", "TestA", "")
	s.event(43*time.Second, "pass", "shop/tests", "TestA/sub", "")
	s.event(43*time.Second, "pass", "shop/tests", "TestA", "")
	s.event(45*time.Second, "output", "shop/fast", "", "ok  \tshop/fast\t4.0s\n")
	s.event(45*time.Second, "pass", "shop/fast", "", "")
	s.event(50*time.Second, "run", "shop/tests", "TestB", "")
	s.tick(60 * time.Second)
	s.event(70*time.Second, "pass", "shop/tests", "TestB", "")
	s.tick(90 * time.Second)
	s.event(95*time.Second, "output", "shop/tests", "", "ok  \tshop/tests\t55.0s\n")
	s.event(95*time.Second, "pass", "shop/tests", "", "")
	r, printed := s.end()
	want := strings.Join([]string{
		"[30s] go test is compiling: no package is running; 0 package(s) finished",
		"ok  \tshop/fast\t4.0s",
		"[1m0s] still running: shop/tests (for 20s, 1 test(s) passed so far, 1 running); 1 package(s) finished",
		"[1m30s] still running: shop/tests (for 50s, 2 test(s) passed so far, 0 running); 1 package(s) finished",
		"ok  \tshop/tests\t55.0s",
	}, "\n") + "\n"
	if printed != want || r.passed != 2 || r.failed {
		t.Fatalf("printed:\n%s\nwant:\n%s\n(passed %d, failed %v; want 2, false)", printed, want, r.passed, r.failed)
	}
}

// Two packages running at once are both named, in order, each with its own
// counts; a failed test is no pass, and a test run but not ended (a
// parallel one, paused) is running.
func TestProgressNamesEveryRunningPackage(t *testing.T) {
	s := newScript(t)
	s.event(time.Second, "start", "shop/b", "", "")
	s.event(time.Second, "start", "shop/a", "", "")
	s.event(2*time.Second, "run", "shop/a", "TestOne", "")
	s.event(2*time.Second, "pass", "shop/a", "TestOne", "")
	s.event(3*time.Second, "run", "shop/b", "TestTwo", "")
	s.event(3*time.Second, "fail", "shop/b", "TestTwo", "")
	s.event(4*time.Second, "run", "shop/b", "TestThree", "")
	s.event(4*time.Second, "pause", "shop/b", "TestThree", "")
	s.tick(30 * time.Second)
	_, printed := s.end()
	want := "[30s] still running: shop/a (for 29s, 1 test(s) passed so far, 0 running), " +
		"shop/b (for 29s, 0 test(s) passed so far, 1 running); 0 package(s) finished\n"
	if printed != want {
		t.Fatalf("printed:\n%q\nwant:\n%q", printed, want)
	}
}
