package tests

import (
	"net/http"
	"testing"
)

// A browser that adds an Idempotency-Key header of its own to every POST
// (Firefox can) still gets exactly-once forms: the form's hidden key wins.
// One checkout form posted twice, with two different headers, is one
// order and one replay, stored under the form's key alone. A form whose
// key comes only in the header still works, and replays too.
func TestFormKeyWinsOverABrowsersHeader(t *testing.T) {
	e, ids, s := signedIn(t)
	form := s.checkout(ids[0], 2)
	var answers []response
	for _, header := range []string{"browser-key-1", `"browser-key-2"`} {
		r, err := s.send(http.MethodPost, "/orders", form, http.Header{"Idempotency-Key": {header}})
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, r)
	}
	for i, r := range answers {
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != answers[0].Header.Get("Location") || r.replayed() != (i == 1) {
			t.Fatalf("post %d: %d %q replayed=%v, want 303 to one order, the second replayed: %s", i+1, r.Status, r.Header.Get("Location"), r.replayed(), r.Body)
		}
	}
	if n := e.count("orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	if n := e.count("idempotency_keys"); n != 1 || e.count("idempotency_keys", "key = ?", form.Get("idempotency_key")) != 1 {
		t.Fatalf("%d keys stored, want 1: the form's", n)
	}

	alone := s.checkout(ids[1], 1)
	key := alone.Get("idempotency_key")
	alone.Del("idempotency_key")
	for i := range 2 {
		r, err := s.send(http.MethodPost, "/orders", alone, http.Header{"Idempotency-Key": {key}})
		if err != nil || r.Status != http.StatusSeeOther || r.replayed() != (i == 1) {
			t.Fatalf("the key in the header alone, post %d: %v %d replayed=%v %s", i+1, err, r.Status, r.replayed(), r.Body)
		}
	}
	if n := e.count("orders"); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
}
