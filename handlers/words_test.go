package handlers

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shop/shop/billing"
	"github.com/shop/shop/database"
	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
)

// Every final error is one the Activity page knows a form to get, or tells
// by its trace; told in words of its own and never with a button to send
// it again. Errors of one form and one status are told alike, since the
// list of keys keeps their status only.
func TestActivityTellsEveryFinalAnswer(t *testing.T) {
	told := map[string]bool{}
	check := func(form string, e *models.Error) {
		told[e.Type.Slug] = true
		if words := views.WordsOf(e); !e.Final || words.Outcome == "" || words.Text == "" || words.Retry != "" {
			t.Errorf("%s on %s: final %v, words %+v; want final, told, with no retry", e.Type.Slug, form, e.Final, words)
		}
	}
	check("/payments", models.ErrPaymentDeclined) // told by its trace
	check("/refunds", models.ErrRefundFailed)     // told by its trace
	for suffix, finals := range views.StoredRefusals {
		for _, e := range finals {
			check(suffix, e)
			if first, this := views.WordsOf(finals[0]).Outcome, views.WordsOf(e).Outcome; this != first {
				t.Errorf("%s: answers told apart (%q, %q), which the Activity page cannot", suffix, first, this)
			}
		}
	}
	for _, typ := range models.FinalTypes() {
		if !told[typ.Slug] {
			t.Errorf("the final %s is no form's on the Activity page", typ.Slug)
		}
	}
}

// The errors that are not the shopper's doing are told as such, and each
// of a refund in its own words, not a payment's.
func TestRefundErrorsAreToldAsRefunds(t *testing.T) {
	for _, e := range []*models.Error{billing.ErrRefundUnconfirmed, billing.ErrEarlierRefundUnconfirmed, billing.ErrRefundUnavailable} {
		if text := views.WordsOf(e).Heading + " " + views.WordsOf(e).Text; strings.Contains(text, "charged") || strings.Contains(text, "payment ") || !strings.Contains(text, "refund") {
			t.Errorf("%s is told in a payment's words: %q", e.Type.Slug, text)
		}
	}
	for _, typ := range []problem.Type{problem.KeyReused, problem.Internal} {
		if text := views.ShopperWords[typ.Slug].Text; strings.Contains(text, "charged") {
			t.Errorf("%s, which any form may get, speaks of charges: %q", typ.Slug, text)
		}
	}
	// The API and the console read a refund's reason by the same rule:
	// trimmed, then at most 200 characters. The API once kept the spaces
	// the console trimmed.
	api, err := refundInput(nil, "  damaged in transit \n")
	if err != nil || api.Reason != "damaged in transit" {
		t.Fatalf("API refund reason: %q, %v", api.Reason, err)
	}
	console, wrong := consoleRefund("12.50", "  damaged in transit \n")
	if wrong != "" || console.Reason != api.Reason || console.AmountCents == nil || *console.AmountCents != 1250 {
		t.Fatalf("console refund: %+v, %q", console, wrong)
	}
	if _, err := refundInput(nil, "   x   "); err != nil {
		t.Fatalf("a short reason padded with spaces refused: %v", err)
	}
	zero := int64(0)
	if _, err := refundInput(&zero, ""); err == nil {
		t.Fatal("a refund of 0 cents accepted")
	}
}

// Each problem type's page says whether its answer is final as its error
// declares it, and the index lists every final answer.
func TestProblemPagesTellFinality(t *testing.T) {
	db := testkit.NewDB(t)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	s := NewServer(Deps{DB: db, Payments: billing.New(billing.Config{DB: db, Provider: &payments.Simulated{DB: db}})})
	get := func(path string) string {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		return w.Body.String()
	}
	final := map[string]bool{}
	index := get("/problems")
	for _, typ := range models.FinalTypes() {
		final[typ.Slug] = true
		if !strings.Contains(index, fmt.Sprintf(`%d <a href="%s">%s</a>`, typ.Status, typ.URI(), typ.Title)) {
			t.Errorf("the index does not list the final %s", typ.Slug)
		}
	}
	for _, typ := range problem.All {
		if page := get(typ.URI()); strings.Contains(page, "A final answer") != final[typ.Slug] {
			t.Errorf("%s: the page says final %v, the error %v", typ.Slug, !final[typ.Slug], final[typ.Slug])
		}
	}
}
