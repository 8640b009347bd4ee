package tests

import (
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// shopper is one browser: a cookie jar, redirects not followed, and the
// headers a browser sends with a form of the shop's own pages.
type shopper struct {
	t      *testing.T
	e      *env
	base   string
	client *http.Client
}

func (e *env) shopper() *shopper { return e.shopperAt(e.url, http.DefaultTransport) }

func (e *env) shopperAt(base string, transport http.RoundTripper) *shopper {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &shopper{t: e.t, e: e, base: base, client: &http.Client{
		Jar: jar, Transport: transport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (s *shopper) send(method, path string, form url.Values, header http.Header) (response, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.base+path, body)
	if err != nil {
		return response{}, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	// What a browser sends with a form of this site.
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", s.base)
	for name, values := range header {
		req.Header[name] = values
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

func (s *shopper) get(path string) response {
	s.t.Helper()
	r, err := s.send(http.MethodGet, path, nil, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// postAsync posts on its own goroutine; the answer arrives on the channel.
func (s *shopper) postAsync(path string, form url.Values) <-chan answerOf {
	done := make(chan answerOf, 1)
	go func() {
		r, err := s.send(http.MethodPost, path, form, nil)
		done <- answerOf{r, err}
	}()
	return done
}

func (s *shopper) post(path string, form url.Values) response {
	s.t.Helper()
	r, err := s.send(http.MethodPost, path, form, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// postTogether posts the same form n times at once, behind one barrier: a
// double-click with JavaScript off.
func (s *shopper) postTogether(n int, path string, form url.Values) []response {
	s.t.Helper()
	start := make(chan struct{})
	out := make([]response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = s.send(http.MethodPost, path, form, nil)
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.t.Fatal(err)
	}
	return out
}

const webPassword = "correct horse"

// signUp creates an account through the sign-up form; the shopper is then
// signed in.
func (s *shopper) signUp(email string) {
	s.t.Helper()
	r := s.post("/signup", url.Values{"email": {email}, "password": {webPassword}})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		s.t.Fatalf("sign up: %d %s %s", r.Status, r.Header.Get("Location"), r.Body)
	}
}

var hiddenKey = regexp.MustCompile(`name="idempotency_key" value="([^"]+)"`)

// formKey is the idempotency key embedded in the page's form.
func formKey(t *testing.T, page response) string {
	t.Helper()
	m := hiddenKey.FindSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no idempotency_key in the page (%d): %s", page.Status, page.Body)
	}
	return string(m[1])
}

// checkout is the catalog's form as rendered, filled with quantities
// (product id, quantity, ...).
func (s *shopper) checkout(quantities ...any) url.Values {
	s.t.Helper()
	page := s.get("/")
	if page.Status != http.StatusOK {
		s.t.Fatalf("catalog: %d %s", page.Status, page.Body)
	}
	form := url.Values{"idempotency_key": {formKey(s.t, page)}}
	for i := 0; i+1 < len(quantities); i += 2 {
		form.Set("qty-"+quantities[i].(string), toString(quantities[i+1]))
	}
	return form
}

// payForm is the order page's pay form as rendered, with a method chosen.
func (s *shopper) payForm(orderPath, method string) url.Values {
	s.t.Helper()
	page := s.get(orderPath)
	if page.Status != http.StatusOK {
		s.t.Fatalf("order page: %d %s", page.Status, page.Body)
	}
	return url.Values{"idempotency_key": {formKey(s.t, page)}, "payment_method": {method}}
}

// placeOrder submits a checkout form and returns the order page's path.
func (s *shopper) placeOrder(form url.Values) string {
	s.t.Helper()
	r := s.post("/orders", form)
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/orders/") {
		s.t.Fatalf("place order: %d %q %s", r.Status, r.Header.Get("Location"), r.Body)
	}
	return r.Header.Get("Location")
}

func toString(v any) string {
	if n, ok := v.(int); ok {
		return strconv.Itoa(n)
	}
	return v.(string)
}

// isPage checks that an answer is an HTML page with this status that says
// what it should.
func isPage(t *testing.T, r response, status int, says ...string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q, want an HTML page: %s", ct, r.Body)
	}
	for _, s := range says {
		if !strings.Contains(string(r.Body), s) {
			t.Fatalf("the page does not say %q: %s", s, r.Body)
		}
	}
}
