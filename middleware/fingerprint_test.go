package middleware

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/gowebpki/jcs"
)

// payment is the request the fingerprint cases vary one thing of at a time.
func payment(change func(*request)) request {
	r := request{
		Method:      "POST",
		Route:       "/api/v1/orders/:id/payments",
		Params:      gin.Params{{Key: "id", Value: "42"}},
		Query:       url.Values{"a": {"1"}, "b": {"2"}},
		ContentType: "application/json",
		Body:        []byte(`{"amount":100,"card":{"number":"4242","cvc":"123"}}`),
	}
	if change != nil {
		change(&r)
	}
	return r
}

func body(s string) func(*request) { return func(r *request) { r.Body = []byte(s) } }

func form(s string) func(*request) {
	return func(r *request) {
		r.ContentType = "application/x-www-form-urlencoded"
		r.Body = []byte(s)
	}
}

func mustFingerprint(t *testing.T, r request) string {
	t.Helper()
	fp, err := fingerprintOf(r)
	if err != nil {
		t.Fatalf("fingerprintOf(%+v): %v", r, err)
	}
	if len(fp) != 64 {
		t.Fatalf("fingerprintOf(%+v) = %q, want 64 hex digits of SHA-256", r, fp)
	}
	return fp
}

func TestFingerprintSameOperation(t *testing.T) {
	tests := []struct {
		name string
		a, b request
	}{
		{"JSON key order", payment(nil), payment(body(`{"card":{"cvc":"123","number":"4242"},"amount":100}`))},
		{"JSON whitespace", payment(nil), payment(body("\n { \"amount\" : 100 ,\t\"card\":{ \"number\":\"4242\",\r\n\"cvc\":\"123\" } } \n"))},
		{"JSON 1 and 1.0", payment(body(`{"n":1}`)), payment(body(`{"n":1.0}`))},
		{"JSON 1e2 and 100", payment(body(`{"n":100}`)), payment(body(`{"n":1e2}`))},
		{"JSON string escapes", payment(body(`{"s":"é/"}`)), payment(body(`{"s":"\u00e9\/"}`))},
		{"JSON media type parameters", payment(nil), payment(func(r *request) { r.ContentType = "Application/JSON; charset=utf-8" })},
		{"+json suffix", payment(func(r *request) { r.ContentType = "application/merge-patch+json"; r.Body = []byte(`{"a":1,"b":2}`) }),
			payment(func(r *request) {
				r.ContentType = "application/merge-patch+json"
				r.Body = []byte(`{ "b":2, "a":1.0 }`)
			})},
		{"problem+json", payment(func(r *request) {
			r.ContentType = "application/problem+json"
			r.Body = []byte(`{"type":"x","status":409}`)
		}),
			payment(func(r *request) {
				r.ContentType = "application/problem+json"
				r.Body = []byte(`{"status":409,"type":"x"}`)
			})},
		{"query order", payment(func(r *request) { r.Query, _ = url.ParseQuery("a=1&b=2") }),
			payment(func(r *request) { r.Query, _ = url.ParseQuery("b=2&a=1") })},
		{"no query", payment(func(r *request) { r.Query = nil }), payment(func(r *request) { r.Query = url.Values{} })},
		{"form field order", payment(form("card=4242&amount=100")), payment(form("amount=100&card=4242"))},
		{"form without key field", payment(form("amount=100&card=4242&idempotency_key=k1")), payment(form("card=4242&amount=100"))},
		{"form key field differs", payment(form("idempotency_key=k1&amount=100")), payment(form("amount=100&idempotency_key=k2"))},
		{"form encoding", payment(form("note=a+b&x=%41")), payment(form("x=A&note=a%20b"))},
		{"raw bytes", payment(func(r *request) { r.ContentType = "text/plain"; r.Body = []byte("hello") }),
			payment(func(r *request) { r.ContentType = "text/plain; charset=utf-8"; r.Body = []byte("hello") })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if a, b := mustFingerprint(t, tt.a), mustFingerprint(t, tt.b); a != b {
				t.Fatalf("fingerprints differ:\n%+v\n%+v", tt.a, tt.b)
			}
		})
	}
}

func TestFingerprintDifferentOperation(t *testing.T) {
	tests := []struct {
		name string
		b    request
	}{
		{"JSON value", payment(body(`{"amount":101,"card":{"number":"4242","cvc":"123"}}`))},
		{"JSON type", payment(body(`{"amount":"100","card":{"number":"4242","cvc":"123"}}`))},
		{"JSON extra member", payment(body(`{"amount":100,"card":{"number":"4242","cvc":"123"},"x":null}`))},
		{"method", payment(func(r *request) { r.Method = "PUT" })},
		{"route", payment(func(r *request) { r.Route = "/api/v1/orders/:id/refunds" })},
		{"path parameter", payment(func(r *request) { r.Params = gin.Params{{Key: "id", Value: "43"}} })},
		{"path parameter name", payment(func(r *request) { r.Params = gin.Params{{Key: "order", Value: "42"}} })},
		{"query value", payment(func(r *request) { r.Query = url.Values{"a": {"1"}, "b": {"3"}} })},
		{"query parameter", payment(func(r *request) { r.Query = url.Values{"a": {"1"}} })},
		{"query moved into the route", payment(func(r *request) { r.Route += "?a=1&b=2"; r.Query = nil })},
		{"form instead of JSON, same bytes", payment(func(r *request) { r.ContentType = "application/x-www-form-urlencoded" })},
		{"canonical JSON bytes as another media type", payment(func(r *request) {
			r.ContentType = "text/plain"
			r.Body = []byte(`{"amount":100,"card":{"cvc":"123","number":"4242"}}`)
		})},
		{"a parameter's value passing for two parameters", payment(func(r *request) {
			r.Params = gin.Params{{Key: "id", Value: "42&b=2"}}
		})},
		{"raw JSON bytes not canonicalised", payment(func(r *request) {
			r.ContentType = "text/plain"
			r.Body = []byte(`{"card":{"cvc":"123","number":"4242"},"amount":100}`)
		})},
	}
	base := mustFingerprint(t, payment(nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if mustFingerprint(t, tt.b) == base {
				t.Fatalf("fingerprint of %+v equals the base request's", tt.b)
			}
		})
	}
	t.Run("path parameters are unambiguous", func(t *testing.T) {
		a := payment(func(r *request) {
			r.Route = "/x/:a/:b"
			r.Params = gin.Params{{Key: "a", Value: "1&b=2"}, {Key: "b", Value: "3"}}
		})
		b := payment(func(r *request) {
			r.Route = "/x/:a/:b"
			r.Params = gin.Params{{Key: "a", Value: "1"}, {Key: "b", Value: "2&b=3"}}
		})
		if mustFingerprint(t, a) == mustFingerprint(t, b) {
			t.Fatal("different path parameters, same fingerprint")
		}
	})
	t.Run("form value", func(t *testing.T) {
		if mustFingerprint(t, payment(form("amount=100"))) == mustFingerprint(t, payment(form("amount=101"))) {
			t.Fatal("forms with different values have the same fingerprint")
		}
	})
	t.Run("raw whitespace", func(t *testing.T) {
		plain := func(s string) request {
			return payment(func(r *request) { r.ContentType = "text/plain"; r.Body = []byte(s) })
		}
		if mustFingerprint(t, plain("a")) == mustFingerprint(t, plain("a ")) {
			t.Fatal("raw bodies are not compared byte for byte")
		}
	})
}

func TestFingerprintRejectsUnreadableBodies(t *testing.T) {
	tests := []struct {
		name    string
		r       request
		wantErr error
	}{
		{"invalid JSON", payment(body(`{"amount":`)), errBodyJSON},
		{"trailing JSON", payment(body(`{"amount":1} {}`)), errBodyJSON},
		{"duplicate JSON keys", payment(body(`{"amount":1,"amount":2}`)), errBodyJSON},
		{"nested duplicate JSON keys", payment(body(`{"card":{"cvc":"1","cvc":"1"}}`)), errBodyJSON},
		{"empty JSON", payment(body(``)), errBodyJSON},
		{"invalid +json", payment(func(r *request) { r.ContentType = "application/problem+json"; r.Body = []byte(`nope`) }), errBodyJSON},
		{"invalid form", payment(form("amount=%zz")), errBodyForm},
		{"keys differing in case", payment(body(`{"payment_method":"pm_card_visa","PAYMENT_METHOD":"pm_card_declined"}`)), errBodyKeysCollide},
		{"keys differing in case, reversed", payment(body(`{"PAYMENT_METHOD":"pm_card_declined","payment_method":"pm_card_visa"}`)), errBodyKeysCollide},
		{"keys differing in case in an array", payment(body(`{"items":[{"quantity":1},{"product_id":"a","Product_ID":"b","quantity":1}]}`)), errBodyKeysCollide},
		{"keys differing in case, escaped", payment(body(`{"a":1,"\u0041":2}`)), errBodyKeysCollide},
		{"keys folding by Unicode (Kelvin sign)", payment(body(`{"k":1,"\u212a":2}`)), errBodyKeysCollide},
		{"keys folding by Unicode (long s)", payment(body(`{"s":1,"\u017f":2}`)), errBodyKeysCollide},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if fp, err := fingerprintOf(tt.r); !errors.Is(err, tt.wantErr) || fp != "" {
				t.Fatalf("fingerprintOf(%q) = %q, %v; want %v", tt.r.Body, fp, err, tt.wantErr)
			}
		})
	}
	t.Run("case only matters among the keys of one object", func(t *testing.T) {
		for _, b := range []string{`{"a":"A","b":"a"}`, `{"a":{"A":1}}`, `[{"a":1},{"A":1}]`, `{"a":[{"A":{"a":1}}]}`, `{"ab":1,"aB ":1}`} {
			mustFingerprint(t, payment(body(b)))
		}
	})
	t.Run("other media types are not parsed", func(t *testing.T) {
		for _, ct := range []string{"text/plain", "", "application/octet-stream", "not a media type;;"} {
			mustFingerprint(t, payment(func(r *request) { r.ContentType = ct; r.Body = []byte(`{"amount":`) }))
		}
	})
}

// FuzzFingerprintJSON checks the JSON canonicaliser both ways: equivalent
// bodies (other whitespace, key order, number spelling, escapes) get one
// fingerprint, and different bodies get different ones. The oracle for
// "equivalent" is encoding/json: two bodies are the same request exactly
// when they decode to equal values. Two bodies with one fingerprint must
// also decode to the same request the way a handler decodes it, into a
// struct whose fields encoding/json matches case-insensitively. The seed
// corpus is in testdata/fuzz/FuzzFingerprintJSON.
func FuzzFingerprintJSON(f *testing.F) {
	seeds := []string{
		`{}`, `[]`, `null`, `true`, `0`, `-1.5e-7`, `1.0`, `{"a":1,"b":[1,2,3]}`, `{"b":{"a":[{},[]]}}`,
		`["😀"]`, `{"\u0000":"\u001f"}`, `[1e21,1e-6,5e-324]`, `  {"a" : 1}  `, `{"a":1,"a":2}`, `{"a":`, `"x"`,
	}
	for i, seed := range seeds {
		f.Add([]byte(seed), []byte(seeds[(i+1)%len(seeds)]))
	}
	// One body, two meanings: the same pair of keys differing in case, in
	// both orders, at the top and inside an array.
	f.Add([]byte(`{"payment_method":"pm_card_visa","PAYMENT_METHOD":"pm_card_declined"}`),
		[]byte(`{"PAYMENT_METHOD":"pm_card_declined","payment_method":"pm_card_visa"}`))
	f.Add([]byte(`{"items":[{"product_id":"a","PRODUCT_ID":"b","quantity":1}]}`),
		[]byte(`{"items":[{"PRODUCT_ID":"b","product_id":"a","quantity":1}]}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fpA, valueA, okA := fuzzCanonical(t, a)
		if !okA {
			return
		}
		// b is compared with a as it is, and as an edit of a (b[0] says
		// where, the rest what replaces the byte there), which keeps the
		// pairs close: where collisions would hide.
		others := [][]byte{b}
		if len(b) > 0 {
			at := int(b[0]) % (len(a) + 1)
			others = append(others, slices.Concat(a[:at], b[1:], a[min(at+1, len(a)):]))
		}
		for _, other := range others {
			fpOther, valueOther, ok := fuzzCanonical(t, other)
			if !ok {
				continue
			}
			if same := reflect.DeepEqual(valueA, valueOther); same != (fpA == fpOther) {
				t.Fatalf("%q and %q decode equal: %v, but their fingerprints equal: %v", a, other, same, fpA == fpOther)
			}
			if fpA == fpOther {
				if reqA, reqOther := decodeAsHandler(a), decodeAsHandler(other); !reflect.DeepEqual(reqA, reqOther) {
					t.Fatalf("%q and %q have one fingerprint but a handler reads them as %+v and %+v", a, other, reqA, reqOther)
				}
			}
		}
	})
}

// fuzzCanonical checks one body against RFC 8785 (jcs) and against spellings
// of itself, and returns its fingerprint and decoded value; ok is false when
// the body is not JSON that both jcs and encoding/json accept.
func fuzzCanonical(t *testing.T, data []byte) (fp string, value any, ok bool) {
	t.Helper()
	fp, err := fingerprintOf(payment(body(string(data))))
	canonical, jcsErr := jcs.Transform(data)
	if jcsErr != nil {
		if !errors.Is(err, errBodyJSON) {
			t.Fatalf("jcs rejects %q (%v) but Fingerprint = %q, %v", data, jcsErr, fp, err)
		}
		return "", nil, false
	}
	var decoded any
	decodedErr := json.Unmarshal(data, &decoded)
	if decodedErr == nil && keysCollide(decoded) != errors.Is(err, errBodyKeysCollide) {
		t.Fatalf("%q: keys differing only in case: %v, but Fingerprint = %q, %v", data, keysCollide(decoded), fp, err)
	}
	if errors.Is(err, errBodyKeysCollide) {
		return "", nil, false
	}
	if err != nil {
		t.Fatalf("jcs accepts %q but Fingerprint fails: %v", data, err)
	}
	var spaced bytes.Buffer
	spaced.WriteString(" \r\n\t")
	if err := json.Indent(&spaced, canonical, "\n\t", " \t"); err != nil {
		t.Fatalf("canonical form %q of %q is not JSON: %v", canonical, data, err)
	}
	spaced.WriteString("\t\n ")
	if again := mustFingerprint(t, payment(body(spaced.String()))); again != fp {
		t.Fatalf("fingerprint of %q differs from that of its canonical form with whitespace %q", data, spaced.Bytes())
	}
	if decodedErr != nil {
		return "", nil, false // beyond encoding/json (e.g. nested too deep): no oracle
	}
	value = decoded
	// encoding/json spells the same value its own way: keys sorted
	// bytewise, <>& escaped, its own number format.
	respelled, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	if again := mustFingerprint(t, payment(body(string(respelled)))); again != fp {
		t.Fatalf("fingerprint of %q differs from that of the same value spelled %q", data, respelled)
	}
	changed, err := json.Marshal(changeOneLeaf(value))
	if err != nil {
		t.Fatal(err)
	}
	if other := mustFingerprint(t, payment(body(string(changed)))); other == fp {
		t.Fatalf("%q and the different %q have the same fingerprint", data, changed)
	}
	return fp, value, true
}

// changeOneLeaf returns v with its first leaf (depth first, object keys in
// sorted order) replaced by a different value, or v wrapped in an array
// when it has no leaf.
func changeOneLeaf(v any) any {
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		if len(keys) == 0 {
			return map[string]any{"": nil}
		}
		out := maps.Clone(v)
		out[keys[0]] = changeOneLeaf(v[keys[0]])
		return out
	case []any:
		if len(v) == 0 {
			return []any{nil}
		}
		out := slices.Clone(v)
		out[0] = changeOneLeaf(v[0])
		return out
	case float64:
		if v+1 != v {
			return v + 1
		}
		return v / 2
	case string:
		return v + "x"
	case bool:
		return !v
	}
	return false // null
}

// keysCollide reports whether some object in v has two keys that
// encoding/json would match to the same struct field.
func keysCollide(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Collect(maps.Keys(v))
		for i := range keys {
			for j := range i {
				if strings.EqualFold(keys[i], keys[j]) {
					return true
				}
			}
		}
		return slices.ContainsFunc(slices.Collect(maps.Values(v)), keysCollide)
	case []any:
		return slices.ContainsFunc(v, keysCollide)
	}
	return false
}

// handlerRequest is a body as the handlers decode one: into a struct.
type handlerRequest struct {
	PaymentMethod any `json:"payment_method"`
	Items         []struct {
		ProductID any `json:"product_id"`
		Quantity  any `json:"quantity"`
	} `json:"items"`
	Failed bool `json:"-"`
}

func decodeAsHandler(data []byte) handlerRequest {
	var r handlerRequest
	if err := json.Unmarshal(data, &r); err != nil {
		return handlerRequest{Failed: true}
	}
	return r
}

// fingerprintOf is a request's fingerprint under no digest key.
func fingerprintOf(r request) (string, error) {
	fp, _, err := digester{}.fingerprints(r)
	return fp, err
}
