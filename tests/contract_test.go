package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/shop/shop/openapi"
	"github.com/shop/shop/problem"
)

// The contract: every request the API tests send through client, and every
// answer they get, is checked against openapi/openapi.yaml — status,
// headers and body. An answer with a status, a header or a field the
// document does not have fails the request, so the test that sent it fails.

// contract is the loaded document and its router, built once.
var contract = sync.OnceValues(func() (*contractDoc, error) {
	// kin-openapi checks date-time by itself; uuid and email need saying.
	openapi3.DefineStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))
	openapi3.DefineStringFormatValidator("email", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForEmail))
	// Pages and the YAML document are text, declared as strings.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/yaml", openapi3filter.PlainBodyDecoder)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.YAML)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contractDoc{doc: doc, router: router}, nil
})

type contractDoc struct {
	doc    *openapi3.T
	router routers.Router
}

// offContract marks a request that breaks the document on purpose (a
// hostile or malformed request): it is sent as it is, and only its answer
// is checked.
type offContractKey struct{}

func offContract(ctx context.Context) context.Context {
	return context.WithValue(ctx, offContractKey{}, true)
}

// commonHeaders may come with any answer without being documented: they are
// HTTP's own, not the API's, the security headers every answer carries
// (handlers/headers.go; docs/api.md), and CORS's, with CORS_ORIGINS set
// (handlers/cors.go; the document's introduction).
var commonHeaders = []string{"Content-Type", "Content-Length", "Date", "Connection", "Transfer-Encoding",
	"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy",
	"Vary", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers"}

// contractTransport checks each request and answer that passes through it.
type contractTransport struct{ next http.RoundTripper }

func (t contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, err := contract()
	if err != nil {
		return nil, fmt.Errorf("contract: openapi.yaml: %w", err)
	}
	var body []byte
	if req.Body != nil {
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	if req.Body == nil {
		out.Body = nil
	}
	route, params, routeErr := c.router.FindRoute(out)
	exempt := req.Context().Value(offContractKey{}) != nil
	if routeErr != nil && !exempt && strings.HasPrefix(req.URL.Path, "/api/") {
		return nil, fmt.Errorf("contract: %s %s is not in openapi.yaml: %v", req.Method, req.URL.Path, routeErr)
	}
	options := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		// The bearer token is the server's to judge: a missing or bad one
		// is a documented 401, not a request outside the document.
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	}
	input := &openapi3filter.RequestValidationInput{Request: out, PathParams: params, Route: route, Options: options}
	if route != nil && !exempt {
		check := out.Clone(out.Context())
		check.Body = io.NopCloser(bytes.NewReader(body))
		input.Request = check
		if err := openapi3filter.ValidateRequest(req.Context(), input); err != nil {
			return nil, fmt.Errorf("contract: the request %s %s breaks openapi.yaml: %v", req.Method, req.URL.Path, err)
		}
		input.Request = out
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		return resp, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err // an answer cut short is a failed request
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	if resp.Header.Get("X-Fault-Injected") == "true" {
		return resp, nil // the storm test's faulty proxy answered, not the server
	}
	if route == nil {
		if !strings.HasPrefix(req.URL.Path, "/api/") {
			return resp, nil // a page of the site, not the API
		}
		if err := outsideAnswer(c, resp, answer); err != nil {
			return nil, err
		}
		return resp, nil
	}
	if err := checkAnswer(route, input, resp, answer, options); err != nil {
		return nil, fmt.Errorf("contract: %s %s answered %d: %w\n%.500s", req.Method, req.URL.Path, resp.StatusCode, err, answer)
	}
	return resp, nil
}

// detailIsASentence: a problem's detail, when it has one, begins with a
// capital and ends with a full stop, whichever layer wrote it.
func detailIsASentence(resp *http.Response, body []byte) error {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		return nil
	}
	var p struct{ Detail string }
	if err := json.Unmarshal(body, &p); err != nil || p.Detail == "" {
		return err
	}
	first, _ := utf8.DecodeRuneInString(p.Detail)
	if !unicode.IsUpper(first) || !strings.HasSuffix(p.Detail, ".") {
		return fmt.Errorf("detail %q is not a sentence", p.Detail)
	}
	return nil
}

// checkAnswer validates status, headers and body, and refuses headers the
// document does not list for the status.
func checkAnswer(route *routers.Route, input *openapi3filter.RequestValidationInput, resp *http.Response, body []byte, options *openapi3filter.Options) error {
	err := openapi3filter.ValidateResponse(input.Request.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: options,
	})
	if err != nil {
		return err
	}
	if err := detailIsASentence(resp, body); err != nil {
		return err
	}
	documented := route.Operation.Responses.Status(resp.StatusCode).Value.Headers
	for name := range resp.Header {
		if !slices.Contains(commonHeaders, name) && !slices.ContainsFunc(slices.Collect(maps.Keys(documented)), func(d string) bool { return strings.EqualFold(d, name) }) {
			return fmt.Errorf("header %s is not documented for this status", name)
		}
	}
	return nil
}

// outsideAnswer checks the answer to an API request that matches no
// operation of the document (sent on purpose): it must be a 404 or 405
// problem, as the document's description says, and a 405's Allow must name
// exactly the methods the document has for the path.
func outsideAnswer(c *contractDoc, resp *http.Response, body []byte) error {
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		return fmt.Errorf("contract: %s %s matches no operation, yet answered %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode)
	}
	if resp.StatusCode == http.StatusMethodNotAllowed {
		if got, want := resp.Header.Get("Allow"), documentedMethods(c, resp.Request); got != want {
			return fmt.Errorf("contract: %s %s answered 405 with Allow %q; the document has %q", resp.Request.Method, resp.Request.URL.Path, got, want)
		}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("contract: %s %s answered %d as %q, not a problem", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("contract: %s %s: %v", resp.Request.Method, resp.Request.URL.Path, err)
	}
	if err := c.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("contract: %s %s answered a problem outside openapi.yaml: %v", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}

// documentedMethods lists the methods the document has for the request's
// path, as an Allow header lists them.
func documentedMethods(c *contractDoc, req *http.Request) string {
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := req.Clone(req.Context())
		probe.Method = m
		if _, _, err := c.router.FindRoute(probe); err == nil {
			methods = append(methods, m)
		}
	}
	return strings.Join(methods, ", ")
}

// The document is valid OpenAPI 3.1 (kin-openapi's validation; .ci/run also
// lints it with Redocly), and the server serves it, as JSON and as YAML.
func TestOpenAPIDocumentIsValidAndServed(t *testing.T) {
	c, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	if !c.doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %s, want 3.1", c.doc.OpenAPI)
	}
	e := newEnv(t)
	r := e.do(request{method: "GET", path: "/openapi.json"})
	if r.Status != http.StatusOK {
		t.Fatalf("/openapi.json: %d", r.Status)
	}
	served, err := openapi3.NewLoader().LoadFromData(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(served.Paths.Map()), len(c.doc.Paths.Map()); got != want || served.Info.Title != c.doc.Info.Title {
		t.Fatalf("/openapi.json has %d paths titled %q, want %d titled %q", got, served.Info.Title, want, c.doc.Info.Title)
	}
	r = e.do(request{method: "GET", path: "/openapi.yaml"})
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, openapi.YAML) {
		t.Fatalf("/openapi.yaml: %d, %d bytes, want the %d of openapi.yaml", r.Status, len(r.Body), len(openapi.YAML))
	}
}

// The contract checker itself refuses what the document does not say: an
// undocumented status, field or header, and a request that breaks it.
func TestContractRefusesWhatTheDocumentDoesNotSay(t *testing.T) {
	cases := []struct {
		name    string
		req     *http.Request
		status  int
		header  http.Header
		body    string
		refused string
	}{
		{"documented", get("/api/v1/products"), 200, jsonHeader(), `{"products":[]}`, ""},
		{"undocumented status", get("/api/v1/products"), 418, jsonHeader(), `{}`, "status"},
		{"undocumented field", get("/api/v1/products"), 200, jsonHeader(), `{"products":[],"extra":1}`, "extra"},
		{"undocumented header", get("/api/v1/products"), 200, withHeader(jsonHeader(), "X-Debug", "1"), `{"products":[]}`, "X-Debug"},
		{"wrong type", get("/api/v1/products"), 200, jsonHeader(), `{"products":[{"id":"x"}]}`, "required"},
		{"wrong format", post("/api/v1/users", `{"email":"a@example.com","password":"long enough"}`), 201, jsonHeader(), `{"id":"not-a-uuid","email":"a@example.com"}`, "uuid"},
		{"missing request id", get("/api/v1/products"), 200, http.Header{"Content-Type": {"application/json"}}, `{"products":[]}`, "X-Request-Id"},
		{"missing documented header", post("/api/v1/tokens", `{"email":"a@example.com","password":"long enough"}`), 201, jsonHeader(), `{"token":"shp_` + strings.Repeat("a", 43) + `","token_type":"Bearer"}`, "Cache-Control"},
		{"request breaks the document", post("/api/v1/users", `{"email":"a@example.com"}`), 201, jsonHeader(), `{"id":"f3a9d313-06ed-40e2-a528-58578348a7d5","email":"a@example.com"}`, "password"},
		{"unknown API path", get("/api/v1/nothing"), 404, jsonHeader(), `{}`, "not in openapi.yaml"},
		{"405 allowing what the document does not", offContractRequest("PUT", "/api/v1/orders"), 405, withHeader(problemHeader(), "Allow", "GET, POST, PUT"), methodNotAllowed, "Allow"},
		{"405 allowing what the document has", offContractRequest("PUT", "/api/v1/orders"), 405, withHeader(problemHeader(), "Allow", "GET, POST"), methodNotAllowed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			canned := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: tc.status, Header: tc.header, Body: io.NopCloser(strings.NewReader(tc.body)), Request: r}, nil
			})
			_, err := contractTransport{next: canned}.RoundTrip(tc.req)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("got %v, want a refusal naming %q", err, tc.refused)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func get(path string) *http.Request {
	r, _ := http.NewRequest("GET", "http://127.0.0.1"+path, nil)
	return r
}

func post(path, body string) *http.Request {
	r, _ := http.NewRequest("POST", "http://127.0.0.1"+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func offContractRequest(method, path string) *http.Request {
	r, _ := http.NewRequestWithContext(offContract(context.Background()), method, "http://127.0.0.1"+path, nil)
	return r
}

const methodNotAllowed = `{"type":"/problems/method-not-allowed","title":"Method not allowed","status":405}`

func problemHeader() http.Header {
	return http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"req-1"}}
}

func jsonHeader() http.Header {
	return http.Header{"Content-Type": {"application/json; charset=utf-8"}, "X-Request-Id": {"req-1"}}
}

func withHeader(h http.Header, name, value string) http.Header {
	h.Set(name, value)
	return h
}

// Every problem type the API can answer is named in the document, with its
// status.
func TestEveryProblemTypeIsDocumented(t *testing.T) {
	for _, typ := range problem.All {
		if typ == problem.CrossOrigin {
			continue // the browser checkout's only
		}
		row := fmt.Sprintf("| %d | ", typ.Status)
		at := bytes.Index(openapi.YAML, []byte(row))
		if at < 0 {
			t.Fatalf("openapi.yaml has no row for status %d", typ.Status)
		}
		line, _, _ := bytes.Cut(openapi.YAML[at:], []byte("\n"))
		if !bytes.Contains(line, []byte("`"+typ.URI()+"`")) {
			t.Errorf("openapi.yaml does not list %s under %d", typ.URI(), typ.Status)
		}
	}
}
