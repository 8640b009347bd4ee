package tests

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shop/shop/outbox"
	"github.com/shop/shop/outbox/publish"
)

// natsServer is a NATS server with JetStream of the test's own, on a port
// and a store that outlive a kill, so that it comes back as it was.
type natsServer struct {
	t         *testing.T
	port, dir string
	cmd       *exec.Cmd
}

func newNATSServer(t *testing.T) *natsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	s := &natsServer{t: t, port: port, dir: t.TempDir()}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *natsServer) url() string { return "nats://127.0.0.1:" + s.port }

// start runs the server and waits until it takes connections.
func (s *natsServer) start() {
	s.t.Helper()
	s.cmd = exec.Command("/usr/sbin/nats-server", "-js", "-a", "127.0.0.1", "-p", s.port, "-sd", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	until(s.t, "nats-server to take connections", func() bool {
		conn, err := nats.Connect(s.url())
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

// kill ends the server at once (SIGKILL), as a crash does.
func (s *natsServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// freeze stops the server's process (SIGSTOP): its connections stay up,
// and nothing it is sent is answered, until thaw.
func (s *natsServer) freeze() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

func (s *natsServer) thaw() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// logLines is a logger's output, one line a write, each sent with the time it came.
type logLines chan loggedLine

type loggedLine struct {
	at   time.Time
	line string
}

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- loggedLine{time.Now(), string(p)}:
	default:
	}
	return len(p), nil
}

// A broker that stops answering, its connection still up, leaves the relay
// waiting for acks no longer than its lease of the consumer: the pass ends
// by the lease's end, not at the publishes' ack timeout (10 s), so that an
// instance that takes the consumer over never publishes beside it. Nothing
// is marked published meanwhile; once the broker answers again, each event
// is in the stream once.
func TestAPublishWaitingForAcksEndsByTheLeasesEnd(t *testing.T) {
	broker := newNATSServer(t)
	e := newEnv(t)
	stream, prefix := "LEASED", "leased.shop"
	js, err := publish.NewJetStream(t.Context(), broker.url(), stream, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	const lease = 2 * time.Second
	logs := make(logLines, 100)
	relay := outbox.NewRelay(e.db, []outbox.Consumer{js}, outbox.RelayConfig{Interval: 20 * time.Millisecond, Lease: lease,
		Holder: "leased", MaxAttempts: 1000, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithCancel(t.Context())
	relaying := make(chan struct{})
	go func() { defer close(relaying); relay.Run(ctx) }()
	defer func() { cancel(); <-relaying }()

	e.shopperOrder("acked@example.com")
	untilRelayed(t, e.db, js.Name(), 2)
	broker.freeze()
	defer broker.thaw()
	committed := time.Now()
	e.shopperOrder("unacked@example.com")
	for ended := false; !ended; {
		select {
		case l := <-logs:
			if ended = strings.Contains(l.line, "consumer failed"); ended && l.at.Sub(committed) > lease+2*time.Second {
				t.Fatalf("the pass ended %s after the commit, waiting for acks past its lease of %s: %s", l.at.Sub(committed), lease, l.line)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no pass ended within 15 s of the commit while the broker answered nothing")
		}
	}
	if n := e.count("inbox", "consumer = ?", js.Name()); n != 2 {
		t.Fatalf("%d events marked published while the broker answered nothing; want the 2 from before", n)
	}
	broker.thaw()
	untilRelayed(t, e.db, js.Name(), 4)
	conn, err := nats.Connect(broker.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	(&jetStream{t: t, js: check, stream: stream, prefix: prefix}).onceEach(eventsOf(t, e.db))
}

// The broker is killed while orders are placed and paid, and stays away
// for longer than nats.go's defaults would have kept trying (60
// reconnects): when it is back, every event is in the stream exactly once,
// with no restart of the relay, and the shop said it was ready throughout.
func TestABrokerOutageEndsWithEveryEventPublishedOnce(t *testing.T) {
	brokerOutage(t, 150)
}

// brokerOutage runs that story with an outage of failed reconnects tries
// (each 20 ms apart: the test shrinks the wait through the publisher's
// options, where the shop's backs off to 15 s).
func brokerOutage(t *testing.T, failedReconnects int64) {
	broker := newNATSServer(t)
	e := newEnv(t)
	var failed atomic.Int64
	stream, prefix := "OUTAGE", "outage.shop"
	js, err := publish.NewJetStream(t.Context(), broker.url(), stream, prefix,
		nats.CustomReconnectDelay(func(int) time.Duration { return 20 * time.Millisecond }),
		nats.ReconnectErrHandler(func(*nats.Conn, error) { failed.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	relay := outbox.NewRelay(e.db, []outbox.Consumer{js}, outbox.RelayConfig{Interval: 20 * time.Millisecond, Lease: time.Minute,
		Holder: "outage", MaxAttempts: 1000, Logger: slog.New(slog.DiscardHandler)})
	e.deps.Collectors = relay.Collectors()
	e.server = newServer(t, e.deps)
	srv := httptest.NewServer(e.server)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	ctx, cancel := context.WithCancel(t.Context())
	relaying := make(chan struct{})
	go func() { defer close(relaying); relay.Run(ctx) }()
	defer func() { cancel(); <-relaying }()

	e.shopperOrder("before@example.com")
	untilRelayed(t, e.db, js.Name(), 2)
	broker.kill()
	for i := range 3 {
		e.shopperOrder(fmt.Sprintf("during-%d@example.com", i))
	}
	until(t, "the publisher to fail its reconnects", func() bool { return failed.Load() >= failedReconnects })
	if r := e.do(request{method: "GET", path: "/readyz"}); r.Status != http.StatusOK {
		t.Fatalf("readyz during the outage: %d %s; want ready: the shop still takes orders", r.Status, r.Body)
	}
	if n := e.count("inbox", "consumer = ?", js.Name()); n != 2 {
		t.Fatalf("%d events marked published while the broker was away; want the 2 from before", n)
	}
	if got := gauge(e.metrics(), `shop_outbox_pending{consumer="nats"}`); got != 6 || gauge(e.metrics(), `shop_outbox_oldest_age_seconds{consumer="nats"}`) <= 0 {
		t.Fatalf("shop_outbox_pending %v during the outage; want the 6 events of the 3 orders, and an age", got)
	}
	broker.start()
	e.shopperOrder("after@example.com")
	untilRelayed(t, e.db, js.Name(), 10)
	if pending, parked := gauge(e.metrics(), `shop_outbox_pending{consumer="nats"}`), gauge(e.metrics(), `shop_outbox_parked{consumer="nats"}`); pending != 0 || parked != 0 {
		t.Fatalf("shop_outbox_pending %v, shop_outbox_parked %v after the outage; want 0 and 0", pending, parked)
	}

	conn, err := nats.Connect(broker.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	(&jetStream{t: t, js: check, stream: stream, prefix: prefix}).onceEach(eventsOf(t, e.db))
}
