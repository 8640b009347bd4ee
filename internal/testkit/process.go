package testkit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles the shop's server into dir, with the race detector when
// race is set and with the given build tags, and returns the binary's path.
func Build(dir string, race bool, tags ...string) (string, error) {
	path := filepath.Join(dir, "shop")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := []string{"build", "-o", path}
	if race {
		args = append(args, "-race")
	}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	if out, err := exec.Command(goTool, append(args, "github.com/shop/shop")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, nil
}

// Process is the server running as a process of its own, on 127.0.0.1.
type Process struct {
	URL    string
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	out    bytes.Buffer
}

var servingLine = regexp.MustCompile(`msg="shop is serving" shop=http://localhost:(\d+)/`)

// Start runs binary in dir with the environment given (on top of this
// process's own) on a free port, and waits until it serves. The process
// dies with the caller.
func Start(binary, dir string, env ...string) (*Process, error) {
	p := &Process{exited: make(chan struct{})}
	p.cmd = exec.Command(binary)
	p.cmd.Dir = dir
	p.cmd.Env = append(append(os.Environ(), "HOST=127.0.0.1", "PORT=0", "LOG_LEVEL=info"), env...)
	dieWithParent(p.cmd)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = p
	if err := p.cmd.Start(); err != nil {
		return nil, err
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
	select {
	case n := <-port:
		p.URL = "http://127.0.0.1:" + n
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("exited before serving:\n%s", p.Output())
	case <-time.After(90 * time.Second):
		p.Kill()
		return nil, fmt.Errorf("did not start serving:\n%s", p.Output())
	}
}

func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is everything the process has logged.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Kill sends SIGKILL — no shutdown, no deferred code — and waits for the
// process to be gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Stop sends SIGTERM and waits for a clean exit, or kills the process
// after grace; it reports whether the exit was clean.
func (p *Process) Stop(grace time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.exited:
		if !p.cmd.ProcessState.Success() {
			return fmt.Errorf("exit after SIGTERM: %v", p.cmd.ProcessState)
		}
		return nil
	case <-time.After(grace):
		p.Kill()
		return errors.New("still running after SIGTERM: killed")
	}
}

// RSS is the process's resident set size in bytes, from /proc.
func (p *Process) RSS() (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}
