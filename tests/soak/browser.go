package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// shopper is one browser: a cookie jar, redirects not followed, and the
// headers a browser sends with the shop's own forms.
type shopper struct {
	client *http.Client
}

func newShopper(f *fleet, email string) (*shopper, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	s := &shopper{client: &http.Client{Jar: jar, Transport: f.transport(), Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	status, _, body, err := s.send(context.Background(), http.MethodPost, "/signup", url.Values{"email": {email}, "password": {"correct horse"}})
	if err == nil && status != http.StatusSeeOther {
		err = fmt.Errorf("sign up %s: %d %s", email, status, body)
	}
	return s, err
}

func (s *shopper) send(ctx context.Context, method, path string, form url.Values) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+host+path, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", "http://"+host)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// submit posts a form until it gets a final answer, the way a shopper
// presses the button again after an error page: the same form, so the same
// hidden key. It returns the final answer's status and headers, or ok
// false when none came within half a minute.
func (s *shopper) submit(ctx context.Context, path string, form url.Values) (status int, answer http.Header, ok bool) {
	deadline := time.Now().Add(30 * time.Second)
	for wait := 50 * time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, 2*time.Second) {
		status, header, _, err := s.send(ctx, http.MethodPost, path, form)
		retry := err != nil || status >= 500 || status == http.StatusTooManyRequests || (status == http.StatusConflict && header.Get("Retry-After") != "")
		if !retry {
			return status, header, true
		}
		pause := rand.N(wait)
		if after, err := strconv.Atoi(header.Get("Retry-After")); err == nil {
			pause = time.Duration(after) * time.Second
		}
		time.Sleep(pause)
	}
	return 0, nil, false
}

var hiddenKey = regexp.MustCompile(`name="idempotency_key" value="([^"]+)"`)

// page gets a page and the key its form carries, trying again while the
// instances restart.
func (s *shopper) page(ctx context.Context, path string) (string, error) {
	var last error
	for range 30 {
		status, _, body, err := s.send(ctx, http.MethodGet, path, nil)
		if err == nil && status == http.StatusOK {
			if m := hiddenKey.FindSubmatch(body); m != nil {
				return string(m[1]), nil
			}
			return "", fmt.Errorf("%s: no idempotency_key in the page", path)
		}
		last = fmt.Errorf("%s: %d %v", path, status, err)
		time.Sleep(time.Second)
	}
	return "", last
}

// browserOrder is one shopper's checkout: the catalog's form posted (now
// and then twice at once, a double-click), then the order page's pay form.
func (t *traffic) browserOrder(s *shopper) {
	ctx := context.Background()
	key, err := s.page(ctx, "/")
	if err != nil {
		t.breach("browser: " + err.Error())
		return
	}
	form := url.Values{"idempotency_key": {key}, "qty-" + t.products[rand.IntN(len(t.products))]: {strconv.Itoa(1 + rand.IntN(3))}}
	orderPage, ok := t.browserPost(s, "place", "/orders", form)
	if !ok {
		return
	}
	if rand.IntN(4) == 0 {
		if again, ok := t.browserPost(s, "place again", "/orders", form); ok && again != orderPage {
			t.breach(fmt.Sprintf("browser key %s: placed again, sent to %s instead of %s", key, again, orderPage))
		}
	}
	t.promise(strings.TrimPrefix(orderPage, "/orders/"), false)
	if key, err = s.page(ctx, orderPage); err != nil {
		t.breach("browser: " + err.Error())
		return
	}
	pay := url.Values{"idempotency_key": {key}, "payment_method": {"pm_card_visa"}}
	if back, ok := t.browserPost(s, "pay", orderPage+"/payments", pay); ok && back == orderPage {
		t.promise(strings.TrimPrefix(orderPage, "/orders/"), true)
	}
}

// browserPost submits a form and checks that the final answer is the 303
// to an order page; without one, the form is kept to be sent again.
func (t *traffic) browserPost(s *shopper, what, path string, form url.Values) (string, bool) {
	status, header, ok := s.submit(context.Background(), path, form)
	if !ok {
		t.count("browser "+what+" unknown", false)
		t.later(func(ctx context.Context) bool {
			status, header, ok := s.submit(ctx, path, form)
			if ok {
				t.checkBrowser(what, status, header)
			}
			return ok
		})
		return "", false
	}
	return header.Get("Location"), t.checkBrowser(what, status, header)
}

func (t *traffic) checkBrowser(what string, status int, header http.Header) bool {
	location := header.Get("Location")
	t.count(fmt.Sprintf("browser %s %d", what, status), header.Get("Idempotent-Replayed") == "true")
	if status != http.StatusSeeOther || !strings.HasPrefix(location, "/orders/") {
		t.breach(fmt.Sprintf("browser %s answered %d to %q", what, status, location))
		return false
	}
	return true
}
