package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// help, -h and --help print the usage, version and --version the version,
// and an unknown argument is refused with the usage; none of them reads
// the settings (bad ones here) or opens the database.
func TestCommandLine(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "shop.db")
	env := map[string]string{"DATABASE_URL": dbPath, "PORT": "eighty"}
	shop := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"shop"}, args...), func(k string) string { return env[k] }, &out)
		return out.String(), err
	}
	for _, arg := range []string{"help", "-h", "--help"} {
		out, err := shop(arg)
		if err != nil || !strings.HasPrefix(out, "usage: shop") {
			t.Errorf("shop %s: %q, %v; want the usage", arg, out, err)
		}
		for _, want := range []string{"migrate", "stock set", "staff add|remove", "version", ".env.example", "docs/operations.md"} {
			if !strings.Contains(out, want) {
				t.Errorf("shop %s does not mention %s:\n%s", arg, want, out)
			}
		}
	}
	for _, arg := range []string{"version", "-version", "--version"} {
		if out, err := shop(arg); err != nil || !strings.HasPrefix(out, "shop ") || strings.Count(out, "\n") != 1 {
			t.Errorf("shop %s: %q, %v; want one line naming the build", arg, out, err)
		}
	}
	for _, arg := range []string{"serve", "--port=80", "-v"} {
		out, err := shop(arg)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "usage: shop") || !strings.Contains(err.Error(), arg) || out != "" {
			t.Errorf("shop %s: %q, %v; want the usage, as an error", arg, out, err)
		}
	}
	if _, err := os.Stat(dbPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the database was opened: %v", err)
	}
}

// The program exits 0 after the help and 2 after an unknown argument, the
// usage on stdout for the one and on stderr for the other.
func TestCommandLineExitStatus(t *testing.T) {
	for _, tc := range []struct {
		arg    string
		status int
	}{{"--help", 0}, {"help", 0}, {"--version", 0}, {"nonsense", 2}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStartupErrorIsOneLine$")
		cmd.Dir = t.TempDir() // no .env there
		cmd.Env = []string{"SHOP_TEST_MAIN=1", "SHOP_TEST_ARGS=" + tc.arg, "DATABASE_URL=" + filepath.Join(cmd.Dir, "shop.db")}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		status := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			status = exit.ExitCode()
		}
		if status != tc.status {
			t.Errorf("shop %s: %v, want exit status %d\nstderr: %s", tc.arg, err, tc.status, stderr.String())
		}
		usageOn := map[int]*bytes.Buffer{0: &stdout, 2: &stderr}[tc.status]
		if tc.arg != "--version" && !strings.Contains(usageOn.String(), "usage: shop") {
			t.Errorf("shop %s: no usage in %q", tc.arg, usageOn.String())
		}
		if _, err := os.Stat(filepath.Join(cmd.Dir, "shop.db")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("shop %s opened the database: %v", tc.arg, err)
		}
	}
}
