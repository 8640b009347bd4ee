package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Link is a TCP proxy on 127.0.0.1 to one upstream address, which a test
// can cut — every open connection closed, new ones refused — and restore:
// a database link lost and found again.
type Link struct {
	Addr     string
	upstream string
	ln       net.Listener
	mu       sync.Mutex
	cut      bool
	conns    map[net.Conn]struct{}
}

// NewLink starts a link to upstream, closed when the test ends.
func NewLink(t testing.TB, upstream string) *Link {
	t.Helper()
	l, err := Listen(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// Listen starts a link to upstream; Close ends it.
func Listen(upstream string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{Addr: ln.Addr().String(), upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}}
	go l.serve()
	return l, nil
}

// Close stops the link for good: every connection closed, no new ones.
func (l *Link) Close() {
	l.ln.Close()
	l.Cut()
}

func (l *Link) serve() {
	for {
		client, err := l.ln.Accept()
		if err != nil {
			return
		}
		go l.pipe(client)
	}
}

func (l *Link) pipe(client net.Conn) {
	if !l.track(client) {
		client.Close()
		return
	}
	server, err := net.Dial("tcp", l.upstream)
	if err != nil || !l.track(server) {
		client.Close()
		if server != nil {
			server.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(server, client); done <- struct{}{} }()
	go func() { io.Copy(client, server); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	l.mu.Lock()
	delete(l.conns, client)
	delete(l.conns, server)
	l.mu.Unlock()
}

func (l *Link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// Cut closes every connection through the link and refuses new ones.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}

// Restore lets new connections through again.
func (l *Link) Restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = false
}
