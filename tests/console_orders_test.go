package tests

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// tokenOf is a new API token of the user with the email (web password).
func (e *env) tokenOf(email string) string {
	e.t.Helper()
	r := e.do(request{method: "POST", path: "/api/v1/tokens", body: fmt.Sprintf(`{"email":%q,"password":%q}`, email, webPassword)})
	if r.Status != http.StatusCreated {
		e.t.Fatalf("token: %d %s", r.Status, r.Body)
	}
	return r.json(e.t)["token"].(string)
}

// staffForm is a form of the console's page at pagePath posting to action,
// with its key as rendered and the fields given.
func staffForm(t *testing.T, s *shopper, pagePath, action string, fields ...string) url.Values {
	t.Helper()
	form := url.Values{"idempotency_key": {keyOfForm(t, s.get(pagePath), action)}}
	for i := 0; i+1 < len(fields); i += 2 {
		form.Set(fields[i], fields[i+1])
	}
	return form
}

// The console lists every user's orders newest first, a page at a time,
// finds one by its number or a shopper's email and keeps one status; the
// staff API answers the same listing and any user's order. A search it
// cannot read is a 400, on the page as in the API.
func TestConsoleFindsOrdersAndTheStaffAPIReadsThem(t *testing.T) {
	e := newEnv(t)
	ann, annOrder := e.shopperOrder("ann@example.com")
	_, bobOrder := e.shopperOrder("bob@example.com")
	pending := e.createOrder(ann, "pending", orderBody(e.productPriced(1900), 1))
	staff := e.staffBrowser("staff@example.com")
	staffToken := e.tokenOf("staff@example.com")
	var number int64
	must(t, e.db.Table("orders").Select("number").Where("id = ?", bobOrder).Scan(&number).Error)

	page := staff.get("/staff")
	body := string(page.Body)
	isPage(t, page, http.StatusOK, "ann@example.com", "bob@example.com")
	if a, b, p := strings.Index(body, annOrder), strings.Index(body, bobOrder), strings.Index(body, pending); !(p < b && b < a) {
		t.Fatalf("not newest first: pending at %d, bob's at %d, ann's at %d", p, b, a)
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"q=" + fmt.Sprint(number), []string{bobOrder}},
		{"q=%23" + fmt.Sprint(number), []string{bobOrder}},
		{"q=ANN%40example.com", []string{pending, annOrder}},
		{"status=pending", []string{pending}},
		{"q=ann%40example.com&status=paid", []string{annOrder}},
		{"q=nobody%40example.com", nil},
	} {
		page := staff.get("/staff?" + c.query)
		api := e.do(request{method: "GET", path: "/api/v1/staff/orders?" + c.query, token: staffToken})
		var got []string
		for _, o := range api.json(t)["orders"].([]any) {
			got = append(got, o.(map[string]any)["order"].(map[string]any)["id"].(string))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("%s: the API lists %v, want %v", c.query, got, c.want)
		}
		if n := strings.Count(string(page.Body), `href="/staff/orders/`); n != len(c.want) {
			t.Fatalf("%s: the page lists %d orders, want %d", c.query, n, len(c.want))
		}
	}
	first := e.do(request{method: "GET", path: "/api/v1/staff/orders?limit=1&q=ann%40example.com", token: staffToken})
	next := first.Header.Get("Link")
	if !strings.Contains(next, "q=ann%40example.com") || !strings.Contains(next, "limit=1") {
		t.Fatalf("the next page's link drops the filter: %q", next)
	}
	isPage(t, staff.get("/staff?status=lost"), http.StatusBadRequest, "Search by an order number")
	isProblem(t, e.do(request{method: "GET", path: "/api/v1/staff/orders?q=nobody", token: staffToken}), http.StatusBadRequest, "/problems/invalid-parameter")

	got := e.do(request{method: "GET", path: "/api/v1/staff/orders/" + annOrder, token: staffToken})
	if got.Status != http.StatusOK || got.json(t)["email"] != "ann@example.com" || got.json(t)["order"].(map[string]any)["status"] != models.OrderPaid {
		t.Fatalf("the staff API's order: %d %s", got.Status, got.Body)
	}
	isProblem(t, e.do(request{method: "GET", path: "/api/v1/staff/orders/" + bobOrder, token: ann}), http.StatusForbidden, "/problems/forbidden")
	isProblem(t, e.do(request{method: "GET", path: "/api/v1/staff/orders/not-an-order", token: staffToken}), http.StatusNotFound, "/problems/not-found")
}

// The shopper asks for a refund; staff refund part of it from the console,
// the double-click's second post replayed: one refund, by the staff user,
// in the provider's ledger; the request is fulfilled, the shopper's page
// shows the refund, and the console's history says who gave it and why.
func TestConsoleRefundFulfilsTheRequest(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	orderID := strings.TrimPrefix(orderPath, "/orders/")
	s.post(orderPath+"/refund-requests", url.Values{"idempotency_key": {keyOfForm(t, s.get(orderPath), orderPath+"/refund-requests")}, "reason": {"Arrived broken"}})
	staff := e.staffBrowser("staff@example.com")
	console := "/staff/orders/" + orderID
	isPage(t, staff.get(console), http.StatusOK, "The shopper asked for a refund (Arrived broken): open.")
	hasNotice(t, s.get(orderPath), "status", "Your request for a refund was received.")

	form := staffForm(t, staff, console, console+"/refunds", "amount", "1.50", "reason", "Broken on arrival")
	answers := staff.postTogether(2, console+"/refunds", form)
	for _, r := range answers {
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != console {
			t.Fatalf("the double-click: %d %q %s", r.Status, r.Header.Get("Location"), r.Body)
		}
	}
	if n, sum := e.refunded(); n != 1 || sum != 150 {
		t.Fatalf("the provider refunded %d times, %d cents; want once, 150", n, sum)
	}
	var req models.RefundRequest
	must(t, e.db.Take(&req).Error)
	if req.State != models.RequestFulfilled || req.RefundID == nil {
		t.Fatalf("the request: %+v, want fulfilled", req)
	}
	isPage(t, s.get(orderPath), http.StatusOK, "Refunded $1.50 to your Test Visa card.")
	page := staff.get(console)
	isPage(t, page, http.StatusOK, "$1.50 by staff@example.com: succeeded. Reason: Broken on arrival", ": refunded.", "Refunded $1.50 on order #1001.")
	staff.post(console+"/refunds", form)
	isPage(t, staff.get(console), http.StatusOK, "Refunded $1.50 on order #1001.", "Sent twice, done once")

	// What is left, then nothing: the form is gone.
	staff.post(console+"/refunds", staffForm(t, staff, console, console+"/refunds", "reason", "The rest"))
	var total int64
	must(t, e.db.Table("orders").Select("total_cents").Where("id = ?", orderID).Scan(&total).Error)
	if n, sum := e.refunded(); n != 2 || sum != total {
		t.Fatalf("the provider refunded %d times, %d cents; want twice, the whole %d", n, sum, total)
	}
	if strings.Contains(string(staff.get(console).Body), `action="`+console+`/refunds"`) {
		t.Fatal("the console offers a refund of an order refunded in full")
	}
}

// A refund form the console cannot read — no reason, an amount that is not
// one — gets the order page again (422), its key kept, nothing refunded; a
// refund of more than is left is refused (409), nothing refunded.
func TestConsoleRefundFormRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	_, orderID := e.shopperOrder("ann@example.com")
	staff := e.staffBrowser("staff@example.com")
	console := "/staff/orders/" + orderID
	for _, fields := range [][]string{
		{"amount", "1.50", "reason", ""},
		{"amount", "1.505", "reason", "why"},
		{"amount", "-2", "reason", "why"},
		{"amount", "0", "reason", "why"},
		{"amount", "ten", "reason", "why"},
		{"amount", "1", "reason", strings.Repeat("x", 201)},
	} {
		form := staffForm(t, staff, console, console+"/refunds", fields...)
		page := staff.post(console+"/refunds", form)
		isPage(t, page, http.StatusUnprocessableEntity, "Nothing was refunded.")
		if k := keyOfForm(t, page, console+"/refunds"); k == form.Get("idempotency_key") {
			continue
		}
		t.Fatalf("%v: the form came back with another key", fields)
	}
	page := staff.post(console+"/refunds", staffForm(t, staff, console, console+"/refunds", "amount", "19.01", "reason", "too much"))
	if page.Status != http.StatusConflict {
		t.Fatalf("a refund of more than the charge: %d %s", page.Status, page.Body)
	}
	if shop, provider := e.refunds(); shop != 0 || provider != 0 {
		t.Fatalf("%d refunds, %d at the provider, want none", shop, provider)
	}
}

// Staff decline a request with a reason: the request says who declined it
// and why, the shopper's page says it was declined, nothing is refunded; a
// second decline of it is refused (409). Staff cancel a pending order of
// any shopper: its units come back, once.
func TestConsoleDeclinesARequestAndCancelsAPendingOrder(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	orderID := strings.TrimPrefix(orderPath, "/orders/")
	s.post(orderPath+"/refund-requests", url.Values{"idempotency_key": {keyOfForm(t, s.get(orderPath), orderPath+"/refund-requests")}})
	staff := e.staffBrowser("staff@example.com")
	var req models.RefundRequest
	must(t, e.db.Take(&req).Error)
	console := "/staff/orders/" + orderID
	decline := console + "/refund-requests/" + req.ID + "/decline"
	isPage(t, staff.post(decline, staffForm(t, staff, console, decline, "reason", "")), http.StatusUnprocessableEntity, "Say why the request is declined")
	form := staffForm(t, staff, console, decline, "reason", "Used for a month")
	if r := staff.post(decline, form); r.Status != http.StatusSeeOther {
		t.Fatalf("decline: %d %s", r.Status, r.Body)
	}
	told := staff.get(console)
	isPage(t, told, http.StatusOK, "Declined the request for a refund on order #1001 ($")
	if strings.Contains(string(told.Body), "Sent twice") {
		t.Fatal("a decline sent once is told as sent twice")
	}
	staff.post(decline, form)
	isPage(t, staff.get(console), http.StatusOK, "Declined the request for a refund on order #1001 ($", "Sent twice, done once")
	must(t, e.db.Take(&req).Error)
	if req.State != models.RequestDeclined || req.DecidedBy == nil || *req.DecidedBy != e.userID("staff@example.com") || req.DeclineReason != "Used for a month" || req.DecidedAt == nil {
		t.Fatalf("the declined request: %+v", req)
	}
	isPage(t, staff.get(console), http.StatusOK, "declined by staff@example.com. Reason: Used for a month",
		"Declined the request for a refund, by staff@example.com (staff). Reason: Used for a month.")
	if n := e.count("audit_entries", "action = ? AND actor_kind = ? AND actor_id = ? AND subject_id = ?", audit.ActionRequestDeclined, audit.ActorStaff, *req.DecidedBy, req.ID); n != 1 {
		t.Fatalf("%d audit entries of the decline by the staff member, want 1", n)
	}
	shopperPage := s.get(orderPath)
	isPage(t, shopperPage, http.StatusOK, "declined by the shop&#39;s staff. Reason: Used for a month")
	hasNotice(t, shopperPage, "status", "Your request for a refund was declined. The shop's staff said: Used for a month")
	isPage(t, staff.get("/account"), http.StatusOK, "Declined a shopper&#39;s request for a refund — done (you sent it twice; it happened once).")
	staffToken := e.tokenOf("staff@example.com")
	read := e.do(request{method: "GET", path: "/api/v1/staff/orders/" + orderID, token: staffToken})
	if reqs := read.json(t)["refund_requests"].([]any); len(reqs) != 1 || reqs[0].(map[string]any)["decline_reason"] != "Used for a month" {
		t.Fatalf("the staff API's requests: %s", read.Body)
	}
	form.Set("idempotency_key", "another")
	if r := staff.post(decline, form); r.Status != http.StatusConflict {
		t.Fatalf("a second decline: %d %s", r.Status, r.Body)
	}
	if shop, provider := e.refunds(); shop != 0 || provider != 0 {
		t.Fatalf("a decline refunded: %d, %d", shop, provider)
	}

	pending := s.placeOrder(s.checkout(ids[0], 2))
	pendingID := strings.TrimPrefix(pending, "/orders/")
	var before models.Product
	must(t, e.db.Take(&before, "id = ?", ids[0]).Error)
	cancel := "/staff/orders/" + pendingID + "/cancel"
	form = staffForm(t, staff, "/staff/orders/"+pendingID, cancel)
	for _, r := range staff.postTogether(2, cancel, form) {
		if r.Status != http.StatusSeeOther {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
	}
	var after models.Product
	must(t, e.db.Take(&after, "id = ?", ids[0]).Error)
	if n := e.count("orders", "id = ? AND status = ? AND cancel_reason = ?", pendingID, models.OrderCancelled, models.CancelledByStaff); n != 1 || after.Stock != before.Stock+2 {
		t.Fatalf("cancelled by staff: %d; stock %d, was %d: want its 2 units back once", n, after.Stock, before.Stock)
	}
	isPage(t, s.get(pending), http.StatusOK, "The shop&#39;s staff cancelled this order.")
	staff.post(cancel, form)
	isPage(t, staff.get("/staff/orders/"+pendingID), http.StatusOK, "Cancelled order #1002 ($", "nothing was charged.", "Sent twice, done once")
	isPage(t, staff.get("/staff/orders/"+pendingID), http.StatusOK, "Cancelled by the shop&#39;s staff.", "Cancelled the order, by staff@example.com (staff). Reason: staff.")
	if n := e.count("audit_entries", "order_id = ? AND action = ? AND actor_kind = ?", pendingID, audit.ActionOrderCancelled, audit.ActorStaff); n != 1 {
		t.Fatalf("%d audit entries of the staff's cancel, want 1", n)
	}
	if r := staff.post(console+"/cancel", url.Values{"idempotency_key": {"cancel-paid"}}); r.Status != http.StatusConflict {
		t.Fatalf("cancelling a paid order: %d %s", r.Status, r.Body)
	}
}

// Staff set a product's units on hand from the console, as `shop stock
// set` does; a count that is not one is refused (422), nothing changed.
func TestConsoleRestocksAProduct(t *testing.T) {
	e := newEnv(t)
	staff := e.staffBrowser("staff@example.com")
	var p models.Product
	must(t, e.db.Order("name").Take(&p).Error)
	for _, bad := range []string{"-1", "many", "1.5", ""} {
		page := staff.post("/staff/products/stock", staffForm(t, staff, "/staff/products", "/staff/products/stock", "sku", p.SKU, "stock", bad))
		isPage(t, page, http.StatusUnprocessableEntity, "Nothing was changed.")
	}
	form := staffForm(t, staff, "/staff/products", "/staff/products/stock", "sku", p.SKU, "stock", "7")
	if p.Stock == 7 {
		t.Fatal("the product has 7 on hand already: the restock would change nothing")
	}
	page := staff.post("/staff/products/stock", form)
	// The table shows the new count, as read in the restock's transaction;
	// the replay of the form is that page.
	row := `<td class="wide">` + html.EscapeString(p.SKU) + `</td>
    <td class="money">7</td>`
	isPage(t, page, http.StatusOK, "Restocked.", html.EscapeString(p.Name)+": 7 units on hand.", row)
	isPage(t, staff.post("/staff/products/stock", form), http.StatusOK, "Restocked.", row)
	var now models.Product
	must(t, e.db.Take(&now, "id = ?", p.ID).Error)
	if now.Stock != 7 {
		t.Fatalf("stock %d after the restock, want 7", now.Stock)
	}
	if n := e.count("audit_entries", "action = ? AND actor_kind = ? AND subject_id = ? AND order_id IS NULL", audit.ActionRestocked, audit.ActorStaff, p.ID); n != 1 {
		t.Fatalf("%d audit entries of the restock by staff, want 1", n)
	}
	if r := staff.post("/staff/products/stock", staffForm(t, staff, "/staff/products", "/staff/products/stock", "sku", "no-such-sku", "stock", "3")); r.Status != http.StatusNotFound {
		t.Fatalf("an unknown product: %d %s", r.Status, r.Body)
	}
}

// Ids that name nothing in the console's forms — bytes PostgreSQL refuses
// in a query (%00, %ff), or a UUID of no request — are a 404, and nothing
// is written: the request stays open, no audit entry, nothing asked.
func TestConsoleFormsRefuseIDsThatNameNothing(t *testing.T) {
	e, ids, s := signedIn(t)
	orderPath := paidOrder(t, s, ids[0], payments.MethodVisa)
	orderID := strings.TrimPrefix(orderPath, "/orders/")
	s.post(orderPath+"/refund-requests", url.Values{"idempotency_key": {keyOfForm(t, s.get(orderPath), orderPath+"/refund-requests")}})
	staff := e.staffBrowser("staff@example.com")
	audits := e.count("audit_entries")
	for i, id := range []string{"%00", "%ff", "a%00b", uuid.NewString()} {
		key := fmt.Sprint("bad-id-", i)
		for _, path := range []string{"/staff/orders/" + orderID + "/refund-requests/" + id + "/decline",
			"/staff/orders/" + id + "/refund-requests/" + id + "/decline", "/staff/in-doubt/refund/" + id, "/staff/in-doubt/payment/" + id} {
			isPage(t, staff.post(path, url.Values{"idempotency_key": {key + path}, "reason": {"no"}}), http.StatusNotFound)
		}
	}
	if n := e.count("refund_requests", "state = ?", models.RequestOpen); n != 1 {
		t.Fatalf("%d open refund requests, want the 1 still open", n)
	}
	if n := e.count("audit_entries"); n != audits {
		t.Fatalf("%d audit entries after the refused forms, %d before", n, audits)
	}
}

// The console offers what the refund gives: a refund in doubt counted, as
// the refund service counts it, so the amount offered is refunded whole.
func TestConsoleOffersWhatTheRefundGives(t *testing.T) {
	lost := &lostRefund{n: 1}
	e := newEnv(t, withProvider(func(p payments.Provider) payments.Provider { lost.Provider = p; return lost }))
	token, orderID := e.paidOrder("lost@example.com", payments.MethodVisa)
	isProblem(t, e.do(e.refundRequest(token, orderID, "lost", `{"amount_cents":700}`)), http.StatusBadGateway, "/problems/refund-unconfirmed")
	staff := e.staffBrowser("staff@example.com")
	console := "/staff/orders/" + orderID
	isPage(t, staff.get(console), http.StatusOK, "Refund (up to $12.00)")
	if r := staff.post(console+"/refunds", staffForm(t, staff, console, console+"/refunds", "amount", "12.00", "reason", "all left")); r.Status != http.StatusSeeOther {
		t.Fatalf("refunding what the console offers: %d %s", r.Status, r.Body)
	}
	if n := e.count("refunds", "order_id = ? AND state IN ?", orderID, []models.State{models.Succeeded, models.Pending}); n != 2 {
		t.Fatalf("%d refunds given, want 2: the one in doubt, resolved, and the one offered", n)
	}
	if n := e.count("simulated_refunds"); n != 2 {
		t.Fatalf("the provider made %d refunds, want 2", n)
	}
}
