package middleware

import "sync"

// waitlist wakes the requests of this instance that wait for a key as soon
// as the attempt running it here ends, instead of leaving them to their next
// poll. Waiting for an attempt on another instance is still polling.
type waitlist struct {
	mu sync.Mutex
	m  map[scopedKey]*waiters
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

// inflight is a set of keys, safe for concurrent use.
type inflight struct {
	mu   sync.Mutex
	keys map[scopedKey]struct{}
}

// enter adds k; false when it was there already.
func (f *inflight) enter(k scopedKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.keys[k]; ok {
		return false
	}
	if f.keys == nil {
		f.keys = map[scopedKey]struct{}{}
	}
	f.keys[k] = struct{}{}
	return true
}

func (f *inflight) leave(k scopedKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.keys, k)
}
