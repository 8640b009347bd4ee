package middleware

import "sync"

// waitlist wakes the requests of this instance that wait for a key as soon
// as the attempt running it here ends, instead of leaving them to their next
// poll. Waiting for an attempt on another instance is still polling. It
// also holds the keys an atomic request of this instance is claiming or
// running: a duplicate here waits to be woken instead of holding a
// connection and a transaction while it waits on the database.
type waitlist struct {
	mu      sync.Mutex
	m       map[scopedKey]*waiters
	running map[scopedKey]bool
}

type scopedKey struct{ scope, key string }

type waiters struct {
	woken chan struct{}
	n     int
}

// join registers a waiter for k; it must leave once it stops waiting.
func (w *waitlist) join(k scopedKey) *waiters {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[scopedKey]*waiters{}
	}
	ws := w.m[k]
	if ws == nil {
		ws = &waiters{woken: make(chan struct{})}
		w.m[k] = ws
	}
	ws.n++
	return ws
}

func (w *waitlist) leave(k scopedKey, ws *waiters) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws.n--
	if ws.n == 0 && w.m[k] == ws {
		delete(w.m, k)
	}
}

// wake tells every waiter of k that the attempt ended: they look again.
func (w *waitlist) wake(k scopedKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.m[k]; ws != nil {
		close(ws.woken)
		delete(w.m, k)
	}
}

// start marks k as run by an atomic request here; false when one already is.
func (w *waitlist) start(k scopedKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[k] {
		return false
	}
	if w.running == nil {
		w.running = map[scopedKey]bool{}
	}
	w.running[k] = true
	return true
}

// stop ends what start began, and wakes k's waiters.
func (w *waitlist) stop(k scopedKey) {
	w.mu.Lock()
	delete(w.running, k)
	w.mu.Unlock()
	w.wake(k)
}
