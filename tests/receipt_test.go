package tests

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/shop/shop/payments"
)

// A paid order has a receipt to print: its number and date, the items and
// total, what was charged to which card — not the declines — and a place
// for refunds. An unpaid order, or someone else's, has none.
func TestReceiptOfAPaidOrder(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 2, ids[1], 1))
	if r := s.get(orderPath + "/receipt"); r.Status != http.StatusNotFound {
		t.Fatalf("receipt of an unpaid order: %d, want 404", r.Status)
	}
	if page := s.get(orderPath); strings.Contains(string(page.Body), "/receipt") {
		t.Fatal("an unpaid order's page links to a receipt")
	}
	s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodInsufficientFunds))
	s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodVisa))

	receipt := s.get(orderPath + "/receipt")
	isPage(t, receipt, http.StatusOK, "<h1>Receipt for order #1001</h1>", "<time datetime=",
		"Book: Retries Without Fear", "Navy cap", "<strong>$92.00</strong>",
		"$92.00 charged to Test Visa card", `id="refunds"`, `<a href="`+orderPath+`">Back to order #1001</a>`)
	if strings.Contains(string(receipt.Body), "without enough funds") {
		t.Fatal("the receipt lists a declined payment")
	}
	if n := e.count("payments"); n != 2 {
		t.Fatalf("%d payments, want the decline and the charge", n)
	}

	other := e.shopper()
	other.signUp("bob@example.com")
	if r := other.get(orderPath + "/receipt"); r.Status != http.StatusNotFound {
		t.Fatalf("someone else's receipt: %d, want 404", r.Status)
	}
}

// Orders have numbers from 1001, shown on every page that names an order
// (its page, My orders, the activity), and My orders keeps the date in a
// column a phone does not hide.
func TestOrdersAreNamedByNumberOnEveryPage(t *testing.T) {
	_, ids, s := signedIn(t)
	first := s.placeOrder(s.checkout(ids[0], 1))
	second := s.placeOrder(s.checkout(ids[1], 1))
	isPage(t, s.get(first), http.StatusOK, "<h1>Order #1001</h1>", "<title>Order #1001 — Shop</title>")
	isPage(t, s.get(second), http.StatusOK, "<h1>Order #1002</h1>")
	list := s.get("/orders")
	isPage(t, list, http.StatusOK, `<a href="`+first+`">Order #1001</a>`, `<a href="`+second+`">Order #1002</a>`)
	dates := regexp.MustCompile(`<td>(<time datetime="[^"]+" data-day>\d{1,2} [A-Z][a-z]{2} \d{4}</time>)</td>`).FindAllSubmatch(list.Body, -1)
	if len(dates) != 2 || strings.Contains(string(list.Body), `class="wide"`) {
		t.Fatalf("My orders: %d dates in plain cells, want 2, and no column a phone hides:\n%s", len(dates), list.Body)
	}
	isPage(t, s.get("/account"), http.StatusOK, `Placed order #1001</a>`, `Placed order #1002</a>`)
}

// A second tab pays an order the first has just paid: the order page says
// the order was already paid elsewhere and that the card chosen here was
// not charged, and only one charge was made.
func TestSecondTabIsToldTheOrderWasAlreadyPaid(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	firstTab := s.payForm(orderPath, payments.MethodVisa)
	secondTab := s.payForm(orderPath, payments.MethodMastercard)
	s.post(orderPath+"/payments", firstTab)
	hasNotice(t, s.get(orderPath), "status", "Paid.")

	r := s.post(orderPath+"/payments", secondTab)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != orderPath {
		t.Fatalf("second tab: %d %q", r.Status, r.Header.Get("Location"))
	}
	page := s.get(orderPath)
	hasNotice(t, page, "status", "Already paid.")
	isPage(t, page, http.StatusOK, "An earlier payment of this order went through (from another tab or window", "nothing was charged to the card you chose here")
	hasNotice(t, s.get(orderPath), "status", "Paid.") // said once
	if n, charges := e.count("payments"), e.charges(); n != 1 || charges != 1 {
		t.Fatalf("%d payments and %d charges, want 1 and 1", n, charges)
	}
}

// The catalog's quantity fields start empty, with 0 as a hint: typing 2
// gives 2, not 20. An empty field is none of that product.
func TestQuantityFieldsStartEmpty(t *testing.T) {
	e, ids, s := signedIn(t)
	page := s.get("/")
	fields := regexp.MustCompile(`<input id="qty-[^"]+"[^>]*>`).FindAllString(string(page.Body), -1)
	if int64(len(fields)) != e.count("products") {
		t.Fatalf("%d quantity fields, want one a product, %d", len(fields), e.count("products"))
	}
	for _, f := range fields {
		if !strings.Contains(f, `placeholder="0" value=""`) {
			t.Fatalf("a quantity field does not start empty: %s", f)
		}
	}
	s.placeOrder(s.checkout(ids[0], 2, ids[1], ""))
	var quantities []int
	e.db.Table("order_items").Pluck("quantity", &quantities)
	if len(quantities) != 1 || quantities[0] != 2 {
		t.Fatalf("order lines %v, want one of 2", quantities)
	}
}

// A test card has one name: the pay form offers it by the name its
// payment lines use.
func TestOneNamePerTestCard(t *testing.T) {
	_, ids, s := signedIn(t)
	orderPath := s.placeOrder(s.checkout(ids[0], 1))
	isPage(t, s.get(orderPath), http.StatusOK, ">Test card without enough funds</label>")
	s.post(orderPath+"/payments", s.payForm(orderPath, payments.MethodInsufficientFunds))
	isPage(t, s.get(orderPath), http.StatusOK, "declined on the Test card without enough funds.", ">Test card without enough funds</label>")
}
