package middleware

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/internal/testkit"
)

func TestKeyChecksAndScope(t *testing.T) {
	h := newHarness(t)
	body := `{"name":"bolt"}`
	steps := []struct {
		name     string
		call     call
		status   int
		problem  *Refusal
		replayed bool
		runs     int // runs of /widgets/1 so far
	}{
		{"no user", call{user: "-", key: "k"}, 401, &refuseUnauthenticated, false, 0},
		{"no key", call{}, 400, &refuseKeyMissing, false, 0},
		{"invalid key", call{key: `"k";p=1`}, 400, &refuseKeyInvalid, false, 0},
		{"two keys in one header", call{key: `"k", "j"`}, 400, &refuseKeyInvalid, false, 0},
		{"malformed JSON", call{key: "k", body: `{"name":`}, 400, &refuseMalformed, false, 0},
		{"duplicate JSON keys", call{key: "k", body: `{"name":"a","name":"b"}`}, 400, &refuseMalformed, false, 0},
		{"alice runs", call{key: "k", body: body}, 201, nil, false, 1},
		{"alice replays", call{key: `"k"`, body: body}, 201, nil, true, 1},
		{"bob's key of the same name is his own", call{user: "bob", key: "k", body: body}, 201, nil, false, 2},
		{"another body", call{key: "k", body: `{"name":"nut"}`}, 422, &refuseKeyReused, false, 2},
		{"another query", call{key: "k", body: body, path: "/widgets/1?x=1"}, 422, &refuseKeyReused, false, 2},
		{"another path parameter", call{key: "k", body: body, path: "/widgets/2"}, 422, &refuseKeyReused, false, 2},
	}
	for _, s := range steps {
		if s.call.body == "" {
			s.call.body = body
		}
		a := h.do(s.call)
		h.wantStep(s.name, a, s.status, s.problem, s.replayed, s.runs)
	}
	h.wantRuns("/widgets/2", 0)
	h.wantKeys("alice/k=completed", "bob/k=completed")
	derived := h.runs.of("/widgets/1")
	h.wantWidgets(derived[0]+"#1", derived[1]+"#2")
	alice, _ := h.key("alice", "k")
	bob, _ := h.key("bob", "k")
	if derived[0] == derived[1] || alice.OperationID == bob.OperationID || string(alice.Body) == string(bob.Body) {
		t.Fatalf("alice's and bob's keys share an operation or an answer: %+v %+v", alice, bob)
	}
	listed, err := h.mw.Keys(context.Background(), "bob", 10)
	if err != nil || len(listed) != 1 || listed[0].Key != "k" || listed[0].Body != nil {
		t.Fatalf("Keys(bob) = %+v, %v; want bob's one key without its body", listed, err)
	}
}

// A form post's hidden idempotency_key field is its key; an
// Idempotency-Key header that differs, or is malformed, is ignored (a
// browser may add its own); without the field the header is the key.
func TestFormKey(t *testing.T) {
	h := newHarness(t)
	const path = "/widgets/1?status=303"
	long := strings.Repeat("f", maxKeyLength)
	steps := []struct {
		name     string
		header   string
		body     string
		status   int
		problem  *Refusal
		replayed bool
		runs     int
	}{
		{"field only", "", "name=bolt&color=red&idempotency_key=form-1", 303, nil, false, 1},
		{"resubmit, fields reordered", "", "idempotency_key=form-1&color=red&name=bolt", 303, nil, true, 1},
		{"header and field agree", `"form-2"`, "name=bolt&idempotency_key=form-2", 303, nil, false, 2},
		{"bare header and field agree", `form-2`, "idempotency_key=form-2&name=bolt", 303, nil, true, 2},
		{"header and field differ: the field wins", "form-3", "name=bolt&idempotency_key=form-4", 303, nil, false, 3},
		{"the same field, another header", `"form-5"`, "idempotency_key=form-4&name=bolt", 303, nil, true, 3},
		{"the same field, a malformed header", `"form-5";p=1`, "name=bolt&idempotency_key=form-4", 303, nil, true, 3},
		{"the same field, two headers in one", `"form-5", "form-6"`, "name=bolt&idempotency_key=form-4", 303, nil, true, 3},
		{"empty field", "", "name=bolt&idempotency_key=", 400, &refuseKeyInvalid, false, 3},
		{"empty field and a header", "form-5", "name=bolt&idempotency_key=", 400, &refuseKeyInvalid, false, 3},
		{"256-character field", "", "name=bolt&idempotency_key=" + long + "f", 400, &refuseKeyInvalid, false, 3},
		{"non-ASCII field", "", "name=bolt&idempotency_key=%C3%A9", 400, &refuseKeyInvalid, false, 3},
		{"no key", "", "name=bolt", 400, &refuseKeyMissing, false, 3},
		{"a malformed header and no field", `"form-5";p=1`, "name=bolt", 400, &refuseKeyInvalid, false, 3},
		{"255-character field", "", "name=bolt&idempotency_key=" + long, 303, nil, false, 4},
		{"header only", "form-6", "name=bolt", 303, nil, false, 5},
		{"header only, resubmitted", `"form-6"`, "name=bolt", 303, nil, true, 5},
		{"two key fields", "", "idempotency_key=form-1&idempotency_key=form-7&color=red&name=bolt", 400, &refuseKeyInvalid, false, 5},
		{"two key fields and a header", "form-7", "idempotency_key=form-1&idempotency_key=form-7&color=red&name=bolt", 400, &refuseKeyInvalid, false, 5},
	}
	var first answer
	for i, s := range steps {
		a := h.do(call{key: s.header, path: path, contentType: "application/x-www-form-urlencoded", body: s.body})
		h.wantStep(s.name, a, s.status, s.problem, s.replayed, s.runs)
		switch i {
		case 0:
			first = a
		case 1:
			if a.header.Get("Location") != first.header.Get("Location") || a.body != first.body {
				t.Fatalf("resubmit answered %v %q, want the original %v %q", a.header, a.body, first.header, first.body)
			}
		}
	}
	// The media type's case does not matter: a resubmission of form-1 with
	// another spelling is still a form carrying its key in a field.
	upper := h.do(call{path: path, contentType: "Application/X-WWW-Form-URLEncoded", body: "color=red&idempotency_key=form-1&name=bolt"})
	if upper.status != 303 || !upper.replayed() {
		t.Fatalf("form with an upper-case media type: %d replayed=%v %s", upper.status, upper.replayed(), upper.body)
	}
	h.wantKeys("alice/"+long+"=completed", "alice/form-1=completed", "alice/form-2=completed", "alice/form-4=completed", "alice/form-6=completed")
	d := h.runs.of("/widgets/1")
	h.wantWidgets(d[0]+"#1", d[1]+"#2", d[2]+"#3", d[3]+"#4", d[4]+"#5")
}

// An ignored header is logged once, at INFO, with both keys by their
// short hashes (the access log's), never in full; a header that agrees, or
// none, is not logged.
func TestIgnoredFormHeaderIsLogged(t *testing.T) {
	logs := &testkit.Buffer{}
	h := newHarness(t, withLogs(logs))
	const path, form = "/widgets/1?status=303", "application/x-www-form-urlencoded"
	const field, header = "field-key-7c1e", "browser-key-9f2a"
	for _, c := range []call{
		{key: field, body: "name=bolt&idempotency_key=" + field},
		{body: "name=bolt&idempotency_key=" + field},
		{key: header, body: "name=bolt&idempotency_key=" + field},
		{key: `"x";p=1`, body: "name=bolt&idempotency_key=" + field},
	} {
		c.path, c.contentType = path, form
		if a := h.do(c); a.status != 303 {
			t.Fatalf("header %q: %d %s", c.key, a.status, a.body)
		}
	}
	h.wantRuns("/widgets/1", 1)
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, "header is ignored") {
			lines = append(lines, line)
		}
	}
	want := []string{
		"level=INFO field_key=" + redact(field) + " field_key_bytes=14 header_key=" + redact(header) + " header_key_bytes=16",
		"level=INFO field_key=" + redact(field) + " field_key_bytes=14 header_problem=",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines about an ignored header, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, line := range lines {
		for _, part := range strings.Fields(want[i]) {
			if !strings.Contains(line, part) {
				t.Errorf("line %d lacks %q: %s", i+1, part, line)
			}
		}
	}
	if strings.Contains(logs.String(), field) || strings.Contains(logs.String(), header) {
		t.Fatalf("a key is logged in full:\n%s", logs.String())
	}
}

// zeros is an endless body of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestBodyTooLarge(t *testing.T) {
	h := newHarness(t)
	over := strings.Repeat("a", MaxBodyBytes+1)
	overForm := "idempotency_key=form&x=" + strings.Repeat("a", MaxBodyBytes)
	tests := []struct {
		name    string
		call    call
		problem Refusal
	}{
		{"Content-Length over", call{key: "length", contentType: "text/plain", body: over}, refuseTooLarge},
		{"chunked over", call{key: "chunked", contentType: "text/plain", bodyReader: io.LimitReader(zeros{}, MaxBodyBytes+1)}, refuseTooLarge},
		{"endless chunked", call{key: "endless", contentType: "text/plain", bodyReader: io.LimitReader(zeros{}, 4*MaxBodyBytes)}, refuseTooLarge},
		{"form over", call{contentType: "application/x-www-form-urlencoded", body: overForm}, refuseTooLarge},
		// Authentication, then the key, then the body size.
		{"no user", call{user: "-", key: "anonymous", contentType: "text/plain", body: over}, refuseUnauthenticated},
		{"invalid key", call{key: `"bad`, contentType: "text/plain", body: over}, refuseKeyInvalid},
		{"no key", call{contentType: "text/plain", body: over}, refuseKeyMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblem(t, h.do(tt.call), tt.problem)
			h.wantKeys()
		})
	}
	t.Run("Content-Length over, body never sent", func(t *testing.T) {
		// Refused on the declared length alone: the server must answer
		// without waiting for a body that does not come.
		a := h.raw(fmt.Sprintf("POST /widgets/1 HTTP/1.1\r\nHost: test\r\nX-Test-User: alice\r\nIdempotency-Key: declared\r\n"+
			"Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n", MaxBodyBytes+1), false)
		wantProblem(t, a, refuseTooLarge)
		h.wantKeys()
	})
	h.wantRuns("/widgets/1", 0)

	limit := h.do(call{key: "limit", contentType: "text/plain", bodyReader: io.LimitReader(zeros{}, MaxBodyBytes)})
	wantAnswer(t, limit, http.StatusCreated, false)
	h.wantKeys("alice/limit=completed")
}

// A body cut short is a malformed request, not a large one, and claims
// nothing.
func TestBodyCutShort(t *testing.T) {
	h := newHarness(t)
	a := h.raw("POST /widgets/1 HTTP/1.1\r\nHost: test\r\nX-Test-User: alice\r\nIdempotency-Key: short\r\n"+
		"Content-Type: text/plain\r\nContent-Length: 100\r\n\r\nonly ten b", true)
	wantProblem(t, a, refuseMalformed)
	h.wantKeys()
	h.wantRuns("/widgets/1", 0)
}

// ReadBody reads a body once: a second ReadBody (the middleware's, after the
// application's check) is handed the same bytes, not a copy read again, and
// the handler still reads the body whole. A body cut short fails every read,
// and one too large is put back as it came, for the refusal that follows.
func TestReadBodyReadsOnce(t *testing.T) {
	gin.SetMode(gin.TestMode)
	body := `{"items": []}`
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader(body)))
	c.Request.ContentLength = -1 // as a chunked body
	first, err := ReadBody(c)
	if err != nil || string(first) != body {
		t.Fatalf("first ReadBody: %q, %v", first, err)
	}
	again, err := ReadBody(c)
	if err != nil || string(again) != body || &again[0] != &first[0] {
		t.Fatalf("second ReadBody: %q, %v, the same bytes: %v", again, err, err == nil && &again[0] == &first[0])
	}
	if handler, err := io.ReadAll(c.Request.Body); err != nil || string(handler) != body {
		t.Fatalf("the handler read %q, %v", handler, err)
	}

	// A body cut short stays cut short for the next reader, not an empty body that reads well.
	c.Request = httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader(`{}`), &cutShort{}))
	c.Request.ContentLength = -1
	for try := 1; try <= 2; try++ {
		if got, err := ReadBody(c); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ReadBody %d of a body cut short: %q, %v", try, got, err)
		}
	}

	c.Request = httptest.NewRequest(http.MethodPost, "/", io.LimitReader(zeros{}, MaxBodyBytes+10))
	c.Request.ContentLength = -1
	if _, err := ReadBody(c); !errors.Is(err, errBodyTooLarge) {
		t.Fatalf("a body too large: %v", err)
	}
	if rest, err := io.ReadAll(c.Request.Body); err != nil || len(rest) != MaxBodyBytes+10 {
		t.Fatalf("a body too large put back: %d bytes, %v; want %d", len(rest), err, MaxBodyBytes+10)
	}
}

// cutShort ends a body as net/http's does when the client stops before its
// Content-Length: io.ErrUnexpectedEOF once, then io.EOF.
type cutShort struct{ told bool }

func (c *cutShort) Read([]byte) (int, error) {
	if c.told {
		return 0, io.EOF
	}
	c.told = true
	return 0, io.ErrUnexpectedEOF
}
