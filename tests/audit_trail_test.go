package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"gorm.io/gorm"

	"github.com/shop/shop/audit"
	"github.com/shop/shop/config"
	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
	"github.com/shop/shop/payments"
)

// Migration 8's table, among those the upgrade test drops to rewind to the
// last release (addedTables, migrations_test.go).
func init() { addedTables = append(addedTables, "audit_entries") }

// auditStep is what one audit entry must say: what was done, by whom (a user's
// id, or "" for the shop's own actors), for how much (-1: no amount) and
// why.
type auditStep struct {
	action audit.Action
	kind   audit.ActorKind
	userID string
	cents  int64
	reason string
}

// wantTrail checks the order's whole audit trail, oldest first, through
// audit.Trail.History: exactly these entries, no more.
func (e *env) wantTrail(orderID string, want ...auditStep) {
	e.t.Helper()
	got, err := audit.Trail{DB: e.db}.History(context.Background(), orderID)
	if err != nil {
		e.t.Fatal(err)
	}
	var lines []string
	for _, g := range got {
		lines = append(lines, trailLine(g))
	}
	var wanted []string
	for _, w := range want {
		wanted = append(wanted, w.line())
	}
	if strings.Join(lines, "\n") != strings.Join(wanted, "\n") {
		e.t.Fatalf("the order's audit trail:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(wanted, "\n"))
	}
	for _, g := range got {
		if g.At.IsZero() || g.OrderID != orderID {
			e.t.Fatalf("an entry without its time or order: %+v", g)
		}
	}
}

func trailLine(g audit.Entry) string {
	id, cents := "", int64(-1)
	if g.Actor.UserID != nil {
		id = *g.Actor.UserID
	}
	if g.AmountCents != nil {
		cents = *g.AmountCents
	}
	return auditStep{g.Action, g.Actor.Kind, id, cents, g.Reason}.line()
}

func (s auditStep) line() string {
	return fmt.Sprintf("%s by %s %q, %d cents, reason %q", s.action, s.kind, s.userID, s.cents, s.reason)
}

// A shopper places an order and cancels it: one entry each, by the
// shopper. The same key again (a double-click's replay) and another
// cancel of the cancelled order write no second entry.
func TestAuditTrailOfAShoppersOrderAndCancel(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("audit-cancel@example.com")
	shopper := e.userID("audit-cancel@example.com")
	product := e.productPriced(1900)
	orderID := e.createOrder(token, "order", orderBody(product, 2))
	if again := e.do(request{method: "POST", path: "/api/v1/orders", token: token, key: key("order"), body: orderBody(product, 2)}); !again.replayed() {
		t.Fatalf("the order's key again: %d %s; want its replay", again.Status, again.Body)
	}
	for _, k := range []string{"c1", "c1", "c2"} {
		if r := e.do(e.cancelRequest(token, orderID, k, `{}`)); r.Status != http.StatusOK {
			t.Fatalf("cancel %s: %d %s", k, r.Status, r.Body)
		}
	}
	e.wantTrail(orderID,
		auditStep{audit.ActionOrderPlaced, audit.ActorShopper, shopper, 3800, ""},
		auditStep{audit.ActionOrderCancelled, audit.ActorShopper, shopper, -1, models.CancelledByShopper})
}

// A shopper pays and asks for a refund; a staff member gives part of it,
// with a reason: the charge is the shopper's, the request theirs with its
// reason, the refund and its outcome the staff member's — once, though
// the staff member's request is sent twice.
func TestAuditTrailOfAStaffRefund(t *testing.T) {
	e := newEnv(t)
	_, orderID := e.shopperOrder("audit-refund@example.com")
	shopper := e.userID("audit-refund@example.com")
	token := e.signUpAgain("audit-refund@example.com")
	if r := e.do(e.refundRequestRequest(token, orderID, "ask", `{"reason":"too small"}`)); r.Status != http.StatusCreated {
		t.Fatalf("the request: %d %s", r.Status, r.Body)
	}
	staff, staffID := e.staffToken("audit-staff@example.com")
	refund := e.refundRequest(staff, orderID, "staff-refund", `{"amount_cents":700,"reason":"arrived broken"}`)
	for range 2 {
		if r := e.do(refund); r.Status != http.StatusCreated {
			t.Fatalf("staff refund: %d %s", r.Status, r.Body)
		}
	}
	e.wantTrail(orderID,
		auditStep{audit.ActionOrderPlaced, audit.ActorShopper, shopper, 1900, ""},
		auditStep{audit.ActionChargeSucceeded, audit.ActorShopper, shopper, 1900, ""},
		auditStep{audit.ActionRefundRequested, audit.ActorShopper, shopper, -1, "too small"},
		auditStep{audit.ActionRefundGiven, audit.ActorStaff, staffID, 700, "arrived broken"},
		auditStep{audit.ActionRefundSucceeded, audit.ActorStaff, staffID, 700, ""})
	if n, sum := e.refunded(); n != 1 || sum != 700 {
		t.Fatalf("the provider refunded %d times, %d cents; want once, 700", n, sum)
	}
	refunds, _ := e.orderJSON(token, orderID)["refunds"].([]any)
	if len(refunds) != 1 || refunds[0].(map[string]any)["created_by"] != staffID {
		t.Fatalf("the order's refunds: %v; want one, created by %s", refunds, staffID)
	}
}

// A charge that asks the shopper to authenticate is recorded when the
// shopper comes back from the provider's page: by the provider return, once
// though the order is read twice after it.
func TestAuditTrailOfAProviderReturn(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("audit-return@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.productPriced(1900), 1))
	_, page := e.payToAuthenticate(token, orderID, "k1")
	e.authenticate(page, "complete")
	for range 2 {
		if state := e.attemptState(token, orderID); state != models.Succeeded {
			t.Fatalf("after the return, the attempt is %q", state)
		}
	}
	e.wantTrail(orderID,
		auditStep{audit.ActionOrderPlaced, audit.ActorShopper, e.userID("audit-return@example.com"), 1900, ""},
		auditStep{audit.ActionChargeSucceeded, audit.ActorProviderReturn, "", 1900, ""})
	e.paidOnce("after the return", orderID)
}

// A charge whose answer was lost is left in doubt: the reconciler asks the
// provider and records the charge, by the reconciler; a second pass
// records nothing more.
func TestAuditTrailOfAReconciledAttempt(t *testing.T) {
	e, orderID, _ := inDoubt(t)
	shopper, total := e.userID("webhook@example.com"), orderTotal(e, orderID)
	e.wantTrail(orderID, auditStep{audit.ActionOrderPlaced, audit.ActorShopper, shopper, total, ""})
	for _, want := range []int{1, 0} {
		if n, err := e.server.Payments().Reconcile(context.Background()); err != nil || n != want {
			t.Fatalf("reconcile: %d resolved, %v; want %d", n, err, want)
		}
	}
	e.wantTrail(orderID,
		auditStep{audit.ActionOrderPlaced, audit.ActorShopper, shopper, total, ""},
		auditStep{audit.ActionChargeSucceeded, audit.ActorReconciler, "", total, ""})
	e.paidOnce("after the reconciler", orderID)
}

// A provider's webhook settles an attempt in doubt; another reports a
// charge on an attempt the shop recorded as refused (a late charge): each
// leaves one entry, by the webhook, though the event is delivered twice.
func TestAuditTrailOfWebhooks(t *testing.T) {
	e, orderID, attempt := inDoubt(t)
	event := stripeEvent(t, "evt_audit_1", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded"))
	e.do(event)
	if again := e.do(event); !again.replayed() {
		t.Fatalf("the event again: %d %s; want its replay", again.Status, again.Body)
	}
	total := orderTotal(e, orderID)
	shopper := e.userID("webhook@example.com")
	e.wantTrail(orderID,
		auditStep{audit.ActionOrderPlaced, audit.ActorShopper, shopper, total, ""},
		auditStep{audit.ActionChargeSucceeded, audit.ActorWebhook, "", total, ""})

	e, orderID, attempt = lostPayment(t, &failing{err: payments.ErrUnavailable, afterCharge: true, n: 1}, models.Failed)
	late := stripeEvent(t, "evt_audit_late", stripe.EventTypePaymentIntentSucceeded, intentOf(attempt, "succeeded"))
	for range 2 {
		if r := e.do(late); r.Status != http.StatusOK {
			t.Fatalf("the late charge: %d %s", r.Status, r.Body)
		}
	}
	total, shopper = orderTotal(e, orderID), e.userID("webhook@example.com")
	e.wantTrail(orderID,
		auditStep{audit.ActionOrderPlaced, audit.ActorShopper, shopper, total, ""},
		auditStep{audit.ActionLateCharge, audit.ActorWebhook, "", total, ""})
	e.paidOnce("after the late charge", orderID)
}

// The expiry sweep cancels unpaid orders: one entry each, by the sweep,
// with the reason, though two sweepers on one database sweep them at once
// and a third sweep comes after.
func TestAuditTrailOfTheExpirySweep(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("audit-expiry@example.com")
	shopper := e.userID("audit-expiry@example.com")
	var placed []string
	for i := range 8 {
		placed = append(placed, e.createOrder(token, fmt.Sprintf("order-%d", i), orderBody(e.productPriced(1900), 1)))
	}
	e.clock.Advance(config.Default().OrderExpiry + time.Minute)
	if n := sweepTogether(t, e.server, newServer(t, e.deps)); n[0]+n[1] != len(placed) {
		t.Fatalf("the two sweeps expired %v, want %d in all", n, len(placed))
	}
	sweepOnce(t, e.server, 0, "again")
	for _, orderID := range placed {
		e.wantTrail(orderID,
			auditStep{audit.ActionOrderPlaced, audit.ActorShopper, shopper, 1900, ""},
			auditStep{audit.ActionOrderCancelled, audit.ActorExpiry, "", -1, models.CancelledExpired})
	}
}

// An act whose actor nobody knows is refused, and writes nothing.
func TestAnActWithoutAnActorIsRefused(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("audit-nobody@example.com")
	orderID := e.createOrder(token, "order", orderBody(e.productPriced(1900), 1))
	tx := e.db.WithContext(context.Background()).Begin()
	defer tx.Rollback()
	_, err := orders.Store{DB: e.db}.CancelOrder(tx, e.userID("audit-nobody@example.com"), orderID, e.clock.Now())
	if !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("a cancel by nobody: %v; want ErrNoActor", err)
	}
}

func orderTotal(e *env, orderID string) int64 {
	e.t.Helper()
	var total int64
	if err := e.db.Model(&models.Order{}).Where("id = ?", orderID).Pluck("total_cents", &total).Error; err != nil {
		e.t.Fatal(err)
	}
	return total
}

// An act on no order (a restock, from the staff console) is recorded with
// a null order, by the actor the context carries, and reads back whole.
func TestAuditEntryOnNoOrder(t *testing.T) {
	e := newEnv(t)
	_, staffID := e.staffToken("audit-restock@example.com")
	product := e.productPriced(1900)
	ctx := audit.WithActor(context.Background(), audit.UserActor(models.User{ID: staffID, Role: models.Staff}))
	if err := audit.Audit(e.db.WithContext(ctx), audit.Entry{Action: audit.ActionRestocked, SubjectID: product, Reason: "40 units"}); err != nil {
		t.Fatal(err)
	}
	if n := e.count("audit_entries", "order_id IS NULL AND subject_id = ? AND actor_kind = ? AND actor_id = ?", product, audit.ActorStaff, staffID); n != 1 {
		t.Fatalf("%d restock entries with a null order, by the staff member; want 1", n)
	}
	var got audit.Entry
	if err := e.db.Where("subject_id = ?", product).Take(&got).Error; err != nil || got.OrderID != "" || got.Reason != "40 units" || got.Actor.UserID == nil || *got.Actor.UserID != staffID {
		t.Fatalf("the entry read back: %+v %v", got, err)
	}
}

// Two refunds the provider failed, both reported succeeded later by its
// events: the refunds given and failed are the staff member's; the late
// refund and the excess one (the charge was given back in full already)
// are the webhook's, one entry each.
func TestAuditTrailOfLateRefunds(t *testing.T) {
	e := newEnv(t)
	token, orderID := e.paidOrder("audit-late-refunds@example.com", payments.MethodRefundFail)
	staff := e.userID("audit-late-refunds@example.com")
	for _, k := range []string{"r1", "r2"} {
		isProblem(t, e.do(e.refundRequest(token, orderID, k, `{}`)), http.StatusConflict, "/problems/refund-failed")
	}
	var failed []models.Refund
	if err := e.db.Where("state = ?", models.Failed).Order("created_at, id").Find(&failed).Error; err != nil || len(failed) != 2 {
		t.Fatalf("%d failed refunds, %v; want 2", len(failed), err)
	}
	for i, r := range failed {
		event := payments.Event{ID: fmt.Sprintf("evt_audit_late_%d", i), ProviderKey: r.ProviderKey,
			Refund: &payments.RefundAnswer{ID: fmt.Sprintf("re_audit_late_%d", i), State: models.Succeeded}}
		err := e.db.Transaction(func(tx *gorm.DB) error {
			_, err := e.server.Payments().ApplyEvent(context.Background(), func() *gorm.DB { return tx }, event)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	reason := failed[0].FailureReason
	e.wantTrail(orderID,
		auditStep{audit.ActionOrderPlaced, audit.ActorStaff, staff, 1900, ""},
		auditStep{audit.ActionChargeSucceeded, audit.ActorStaff, staff, 1900, ""},
		auditStep{audit.ActionRefundGiven, audit.ActorStaff, staff, 1900, ""},
		auditStep{audit.ActionRefundFailed, audit.ActorStaff, staff, 1900, reason},
		auditStep{audit.ActionRefundGiven, audit.ActorStaff, staff, 1900, ""},
		auditStep{audit.ActionRefundFailed, audit.ActorStaff, staff, 1900, reason},
		auditStep{audit.ActionLateRefund, audit.ActorWebhook, "", 1900, ""},
		auditStep{audit.ActionRefundExcess, audit.ActorWebhook, "", 1900, ""})
}
