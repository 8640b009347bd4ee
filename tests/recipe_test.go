package tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/payments"
)

// The stripe-mock recipe of docs/operations.md runs as printed, from the
// repository's root — only its ports are free ones, and the shop's address
// and database come from the environment — and pm_card_visa pays.
// stripe-mock listens on 127.0.0.1 only, for HTTP and for HTTPS.
func TestStripeMockRecipePays(t *testing.T) {
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !fileExists(filepath.Join(strings.TrimSpace(string(gopath)), "bin", "stripe-mock")) {
		needStripeMock(t)
	}
	recipe := operationsBlock(t, "**stripe-mock locally**")
	const mockAddr, mockTLSAddr = "127.0.0.1:12111", "127.0.0.1:12112"
	if strings.Count(recipe, "-http-addr "+mockAddr) != 1 || strings.Count(recipe, mockAddr) != 2 ||
		strings.Count(recipe, "-https-addr "+mockTLSAddr) != 1 || !strings.HasSuffix(strings.TrimSpace(recipe), "go run .") {
		t.Fatalf("the recipe does not run stripe-mock at %s (HTTPS at %s) and then the shop:\n%s", mockAddr, mockTLSAddr, recipe)
	}
	dbURL := testkit.URL(t)
	mock, mockTLS := freeAddr(t), freeAddr(t)
	cmd := exec.Command("sh", "-c", strings.NewReplacer(mockAddr, mock, mockTLSAddr, mockTLS).Replace(recipe))
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", "PORT=0", "DATABASE_URL="+dbURL)
	ownGroup(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(cmd); cmd.Wait() })
	base := make(chan string, 1)
	var printedMu sync.Mutex
	var printedText strings.Builder
	printed := func() string { printedMu.Lock(); defer printedMu.Unlock(); return printedText.String() }
	go func() {
		scanner := bufio.NewScanner(out)
		for scanner.Scan() {
			printedMu.Lock()
			printedText.WriteString(scanner.Text() + "\n")
			printedMu.Unlock()
			if m := servingLine.FindStringSubmatch(scanner.Text()); m != nil {
				base <- "http://127.0.0.1:" + m[1]
			}
		}
		close(base)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // the first go run compiles SQLite
	defer cancel()
	var url string
	select {
	case u, ok := <-base:
		if !ok {
			t.Fatalf("the recipe ended before the shop served:\n%s", printed())
		}
		url = u
	case <-ctx.Done():
		t.Fatal("the shop did not start serving within 5 minutes")
	}
	// stripe-mock, started first, may still be loading Stripe's
	// specification when a built shop is already serving: a shopper pays
	// once both are up, and so does the test.
	for !listening(mock) || !listening(mockTLS) {
		select {
		case <-ctx.Done():
			t.Fatalf("stripe-mock is not listening at %s and %s:\n%s", mock, mockTLS, printed())
		case <-time.After(100 * time.Millisecond):
		}
	}
	onLoopbackOnly(t, mock, mockTLS)
	e := &env{t: t, url: url, db: testkit.Open(t, dbURL), dbURL: dbURL}
	token := e.signUp("recipe@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.products()[0], 1))
	if r := e.do(e.payRequest(token, orderID, "pay", payments.MethodVisa)); r.Status != http.StatusCreated {
		t.Fatalf("pm_card_visa through the recipe's stripe-mock: %d %s\n%s", r.Status, r.Body, printed())
	}
	if e.count("orders", "id = ? AND status = ?", orderID, "paid") != 1 || e.count("payments", "status = ?", "succeeded") != 1 {
		t.Fatal("the order is not paid, once")
	}
}

// operationsBlock is the ```sh block that follows the line beginning with
// title in docs/operations.md.
func operationsBlock(t *testing.T, title string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, found := strings.Cut(string(doc), "\n"+title)
	_, block, fenced := strings.Cut(after, "\n```sh\n")
	block, _, closed := strings.Cut(block, "\n```\n")
	if !found || !fenced || !closed {
		t.Fatalf("docs/operations.md has no sh block after %q", title)
	}
	return block
}

func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
	}
	return err == nil
}

// onLoopbackOnly fails the test if a port of addrs (each 127.0.0.1:port)
// answers on another address of this machine.
func onLoopbackOnly(t *testing.T, addrs ...string) {
	t.Helper()
	ips, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		_, port, _ := net.SplitHostPort(a)
		for _, ip := range ips {
			if n, ok := ip.(*net.IPNet); ok && !n.IP.IsLoopback() && listening(net.JoinHostPort(n.IP.String(), port)) {
				t.Fatalf("port %s answers on %s too, not on 127.0.0.1 only", port, n.IP)
			}
		}
	}
}

// freeAddr is an address of 127.0.0.1 that nothing listened on a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr())
}
