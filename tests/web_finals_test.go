package tests

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// finalWalk sends, from the browser, a form that gets a final answer: it
// sets the order up, and returns the form and where it posts.
type finalWalk struct {
	err  *models.Error
	form func(t *testing.T, s *shopper, product string) (path string, form url.Values)
	// told: the Activity page tells this walk's line in the error's words.
	// A payment of an order another tab paid is a redirect to the order,
	// which the Activity page cannot tell from a payment made.
	told bool
}

var finalWalks = []finalWalk{
	{models.ErrOrderPaid, func(t *testing.T, s *shopper, product string) (string, url.Values) {
		order := s.placeOrder(s.checkout(product, 1))
		other := s.payForm(order, payments.MethodVisa) // a second tab
		s.post(order+"/payments", s.payForm(order, payments.MethodVisa))
		return order + "/payments", other
	}, false},
	{models.ErrPaidNotCancellable, func(t *testing.T, s *shopper, product string) (string, url.Values) {
		order := s.placeOrder(s.checkout(product, 1))
		cancel := url.Values{"idempotency_key": {keyOfForm(t, s.get(order), order+"/cancel")}}
		s.post(order+"/payments", s.payForm(order, payments.MethodVisa))
		return order + "/cancel", cancel
	}, true},
	{models.ErrOrderCancelled, func(t *testing.T, s *shopper, product string) (string, url.Values) {
		order := s.placeOrder(s.checkout(product, 1))
		pay := s.payForm(order, payments.MethodVisa) // the back button brings it back
		s.post(order+"/cancel", url.Values{"idempotency_key": {keyOfForm(t, s.get(order), order+"/cancel")}})
		return order + "/payments", pay
	}, true},
	{models.ErrPaymentDeclined, func(t *testing.T, s *shopper, product string) (string, url.Values) {
		order := s.placeOrder(s.checkout(product, 1))
		return order + "/payments", s.payForm(order, payments.MethodDeclined)
	}, true},
}

// staffFinals are the final answers only staff get, through the API, since
// shoppers have no refund form: TestRefundOfMoreThanIsLeftIsFinal and
// TestAFailedRefundGivesNothingBack walk them.
var staffFinals = map[string]bool{models.ErrRefundExceeds.Type.Slug: true, models.ErrRefundFailed.Type.Slug: true}

// Every final answer, walked through the browser's forms: the page tells
// it in its error's words, with no button to send it again; the form sent
// again gets it replayed; and the Activity page tells it as final, never
// as something to send again.
func TestEveryFinalAnswerIsToldFinalOnFormsAndActivity(t *testing.T) {
	walked := map[string]bool{}
	for _, w := range finalWalks {
		walked[w.err.Type.Slug] = true
		words := views.WordsOf(w.err)
		t.Run(w.err.Type.Slug+"/"+words.Heading, func(t *testing.T) {
			_, ids, s := signedIn(t)
			path, form := w.form(t, s, ids[0])
			first := s.post(path, form)
			page := first
			if first.Status == http.StatusSeeOther {
				page = s.get(first.Header.Get("Location"))
			}
			role := "alert"
			if w.err == models.ErrOrderPaid {
				role = "status" // not the shopper's fault: another tab paid
			}
			hasNotice(t, page, role, words.Text)
			for _, retry := range []string{`class="retry"`, "try again", "send it again"} {
				if strings.Contains(strings.ToLower(string(page.Body)), retry) {
					t.Fatalf("a final answer's page says %q: %s", retry, page.Body)
				}
			}
			if again := s.post(path, form); !again.replayed() || again.Status != first.Status {
				t.Fatalf("the form sent again: %d replayed=%v; want the final %d replayed", again.Status, again.replayed(), first.Status)
			}
			activity := html.UnescapeString(string(s.get("/account").Body))
			if strings.Contains(activity, "send it again") {
				t.Fatalf("the Activity page calls a final answer retryable: %s", activity)
			}
			if w.told && !strings.Contains(activity, " — "+words.Outcome+" (you sent it twice; it happened once).") {
				t.Fatalf("the Activity page does not say %q: %s", words.Outcome, activity)
			}
		})
	}
	for _, typ := range models.FinalTypes() {
		if !walked[typ.Slug] && !staffFinals[typ.Slug] {
			t.Errorf("no walk through a form gets the final %s", typ.Slug)
		}
	}
}

// More than is left to refund is a final answer in the API too: the same
// key gets it replayed, and nothing is refunded.
func TestRefundOfMoreThanIsLeftIsFinal(t *testing.T) {
	e := newEnv(t)
	token, orderID := e.paidOrder("owner@example.com", payments.MethodVisa)
	too := e.refundRequest(token, orderID, "too-much", `{"amount_cents":99999}`)
	isProblem(t, e.do(too), http.StatusConflict, "/problems/refund-exceeds-refundable")
	again := e.do(too)
	isProblem(t, again, http.StatusConflict, "/problems/refund-exceeds-refundable")
	if !again.replayed() {
		t.Fatal("the same key ran the refund again; want its final answer replayed")
	}
	if n := e.count("refunds"); n != 0 {
		t.Fatalf("%d refunds written", n)
	}
}
