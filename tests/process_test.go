package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The server binary, built once per test binary by shopBinary and removed
// by TestMain.
var binary struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// shopBinary builds the real server (with the race detector when the tests
// have it) and returns its path.
func shopBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "shop-test-bin-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "shop")
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		args := []string{"build", "-o", binary.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command(goTool, append(args, "github.com/shop/shop")...).CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// shopProcess is the server running as a process of its own.
type shopProcess struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	mu     sync.Mutex
	out    bytes.Buffer
}

var servingLine = regexp.MustCompile(`msg="shop is serving" shop=http://localhost:(\d+)/`)

// startShop starts the binary with the given environment (on top of the
// test's own, in an empty working directory so no .env is read), on a free
// port, and waits until it serves. The process is killed when the test ends.
func startShop(t *testing.T, name string, env ...string) *shopProcess {
	t.Helper()
	p := &shopProcess{t: t, name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(shopBinary(t))
	p.cmd.Dir = t.TempDir()
	// Their shoppers place many orders each, unpaid: a test of the cap sets its own.
	p.cmd.Env = append(append(os.Environ(), "HOST=127.0.0.1", "PORT=0", "LOG_LEVEL=info", "MAX_PENDING_ORDERS=1000000"), env...)
	dieWithTests(p.cmd)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	port := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			line := scanner.Text()
			p.Write([]byte(line + "\n"))
			if m := servingLine.FindStringSubmatch(line); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
		}
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, p.output())
		}
	})
	select {
	case n := <-port:
		if _, err := strconv.Atoi(n); err != nil {
			t.Fatalf("%s: bad port %q", name, n)
		}
		p.url = "http://127.0.0.1:" + n
	case <-p.exited:
		t.Fatalf("%s exited before serving:\n%s", name, p.output())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start serving:\n%s", name, p.output())
	}
	return p
}

func (p *shopProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *shopProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// kill sends SIGKILL — no shutdown, no deferred code — and waits for the
// process to be gone.
func (p *shopProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// sendTo sends r to the server at base.
func sendTo(base string, r request) (response, error) { return (&env{url: base}).send(r) }

// retryable: an answer that asks the client to come back with the same key.
func retryable(r response) bool {
	return r.Status == http.StatusConflict && r.Header.Get("Retry-After") != ""
}

// untilFinal sends r, with its key, until it gets an answer other than a
// retryable 409 or a failed connection, the way a careful client does. base
// is asked for the server's address before each attempt (it may move). It
// gives up when ctx ends.
func untilFinal(ctx context.Context, base func() string, r request) (response, error) {
	backoff := 10 * time.Millisecond
	for {
		resp, err := sendTo(base(), r)
		if err == nil && !retryable(resp) {
			return resp, nil
		}
		select {
		case <-ctx.Done():
			return resp, errors.Join(ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}
