package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
)

// startShop runs the program on a free port with env added to a fresh
// SQLite database, and returns its address and the channel run's result
// arrives on; cancel begins its shutdown.
func startShop(t *testing.T, env map[string]string) (addr string, cancel func(), done <-chan error) {
	t.Helper()
	env["HOST"], env["PORT"], env["LOG_FORMAT"] = "127.0.0.1", "0", "json"
	env["DATABASE_URL"] = filepath.Join(t.TempDir(), "shop.db")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var out testkit.Buffer
	result := make(chan error, 1)
	go func() { result <- run(ctx, nil, func(k string) string { return env[k] }, &out) }()
	base := serving(t, &out, result)
	return strings.TrimPrefix(base, "http://"), cancel, result
}

// waitClosed reads conn until the server closes it. The deadline only turns
// a connection held for ever into a failure; nothing waits on it.
func waitClosed(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still holds %s", what)
	}
}

// A client sending its body a byte at a time is cut off after
// HTTP_READ_TIMEOUT, and a shutdown begun while it is connected is not held
// up by it: run returns nil, every request answered.
func TestSlowBodyIsCutAndDoesNotHoldTheShutdown(t *testing.T) {
	addr, cancel, done := startShop(t, map[string]string{"HTTP_READ_TIMEOUT": "500ms"})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/tokens HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr)
	cancel() // the shutdown begins with the slow body in flight
	waitClosed(t, conn, "a connection whose body never ends")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the shutdown is held up by the slow client")
	}
}

// A keep-alive connection left idle is closed after HTTP_IDLE_TIMEOUT.
func TestIdleConnectionIsClosed(t *testing.T) {
	addr, _, _ := startShop(t, map[string]string{"HTTP_IDLE_TIMEOUT": "200ms", "HTTP_READ_TIMEOUT": "1h"})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	waitClosed(t, conn, "an idle keep-alive connection")
}
