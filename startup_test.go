package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The program itself, started with bad configuration, exits with status 1
// and one line on stderr naming every problem: no stack trace, no log.
// The test binary plays the program: with SHOP_TEST_MAIN=1 it runs main,
// with the arguments SHOP_TEST_ARGS.
func TestStartupErrorIsOneLine(t *testing.T) {
	if os.Getenv("SHOP_TEST_MAIN") == "1" {
		os.Args = append(os.Args[:1], strings.Fields(os.Getenv("SHOP_TEST_ARGS"))...) // not the test binary's flags
		main()
		return
	}
	cases := []struct {
		env  []string
		want []string
	}{
		{[]string{"DATABASE_URL=mysql://localhost/shop"}, []string{`DATABASE_URL: unknown database scheme "mysql"`}},
		{
			[]string{"IDEMPOTENCY_TTL=1 day", "SHOP_ENV=production", "DATABASE_URL=mongodb://db/shop"},
			[]string{`IDEMPOTENCY_TTL="1 day"`, "SESSION_SECRET is required", "unknown database scheme"},
		},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStartupErrorIsOneLine$")
		cmd.Dir = t.TempDir() // no .env there
		cmd.Env = append([]string{"SHOP_TEST_MAIN=1", "PORT=0"}, tc.env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("%v: %v, want exit status 1\nstderr: %s", tc.env, err, stderr.String())
		}
		msg := stderr.String()
		if !strings.HasPrefix(msg, "shop: configuration: ") || strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") {
			t.Fatalf("%v: stderr is not one configuration line:\n%s", tc.env, msg)
		}
		for _, want := range tc.want {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: %q does not name %q", tc.env, msg, want)
			}
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q, want nothing", tc.env, stdout.String())
		}
	}
}
