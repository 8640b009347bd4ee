package main

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/internal/testkit"
)

// findings is the end-of-run audit.
type findings struct {
	money      testkit.MoneyAudit
	events     testkit.EventAudit
	stalled    []string
	missing    int // answered effects absent from the database
	trail      trail
	violations []string
}

// audit checks the database and the provider's ledger once the reconciler
// has had time to resolve what the faults left in doubt (a minute at
// most), then the stock identity, the promises the answers made, the keys
// and the RSS.
func audit(ctx context.Context, f *fleet, t *traffic, cfg config) (findings, error) {
	var a findings
	var err error
	for deadline := time.Now().Add(time.Minute); ; {
		if a.money, err = testkit.AuditMoney(f.db.WithContext(ctx)); err != nil {
			return a, err
		}
		if len(a.money.Violations) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	a.violations = append(a.violations, a.money.Violations...)
	if a.stalled, err = testkit.StalledKeys(f.db, 0); err != nil {
		return a, err
	}
	for _, k := range a.stalled {
		a.violations = append(a.violations, "a key stuck in progress past its lease: "+k)
	}
	// On hand + units sold = the units at the start (the soak receives and
	// writes off none), and held = the units of the live unpaid orders.
	stock, err := testkit.AuditStock(f.db.WithContext(ctx), t.stock)
	if err != nil {
		return a, err
	}
	a.violations = append(a.violations, stock...)
	// One event per fact: orders placed, payments settled, refunds
	// settled, cancellations (the outbox).
	if a.events, err = testkit.AuditEvents(f.db.WithContext(ctx)); err != nil {
		return a, err
	}
	a.violations = append(a.violations, a.events.Violations...)
	receipts, err := auditReceipts(ctx, f.db)
	if err != nil {
		return a, err
	}
	a.violations = append(a.violations, receipts...)
	var orders []struct{ ID, Status string }
	if err := f.db.Raw(`SELECT id, status FROM orders`).Scan(&orders).Error; err != nil {
		return a, err
	}
	status := map[string]string{}
	for _, o := range orders {
		status[o.ID] = o.Status
	}
	for id := range t.created {
		if _, ok := status[id]; !ok {
			a.missing++
			a.violations = append(a.violations, "an order answered as made is not in the database: "+id)
		}
	}
	for id := range t.paid {
		if status[id] != "paid" {
			a.missing++
			a.violations = append(a.violations, fmt.Sprintf("an order answered as paid is %q", status[id]))
		}
	}
	// Every money movement has an actor in the audit trail.
	if a.trail, err = auditTrail(f.db.WithContext(ctx)); err != nil {
		return a, err
	}
	a.violations = append(a.violations, a.trail.violations...)
	limit := cfg.cacheBytes + cfg.rssMargin
	for i, peak := range f.rssPeak {
		if peak > limit {
			a.violations = append(a.violations, fmt.Sprintf("instance %s: RSS peak %d MiB over IDEMPOTENCY_CACHE_BYTES + margin = %d MiB", f.instances[i].name, peak>>20, limit>>20))
		}
	}
	if f.samples == 0 {
		a.violations = append(a.violations, "no RSS sample was taken")
	}
	a.violations = append(a.violations, f.problems...)
	a.violations = append(a.violations, t.breaches...)
	return a, nil
}

// trail is what the audit trail says of the run's money movements.
type trail struct {
	movements, recorded int64 // final payments and settled refunds; those with an actor in the trail
	violations          []string
}

// movementActions are the audit entries (audit.Action) that record a
// payment's or a refund's state.
var movementActions = []struct {
	table, state string
	actions      []string
}{
	{"payments", "succeeded", []string{"charge_succeeded", "late_charge"}},
	{"payments", "declined", []string{"charge_declined"}},
	{"refunds", "succeeded", []string{"refund_succeeded", "late_refund"}},
	{"refunds", "pending", []string{"refund_pending"}},
	{"refunds", "failed", []string{"refund_failed"}},
	{"refunds", "excess", []string{"refund_excess"}},
}

// auditTrail checks that every money movement has an actor in the audit
// trail: each succeeded or declined payment, and each settled refund, has
// an entry of its state naming it, by someone.
func auditTrail(db *gorm.DB) (trail, error) {
	var tr trail
	for _, m := range movementActions {
		column := "status"
		if m.table == "refunds" {
			column = "state"
		}
		var all, recorded int64
		q := "SELECT COUNT(*) FROM " + m.table + " r WHERE r." + column + " = ?"
		if err := db.Raw(q, m.state).Scan(&all).Error; err != nil {
			return tr, err
		}
		err := db.Raw(q+" AND EXISTS (SELECT 1 FROM audit_entries a WHERE a.subject_id = r.id AND a.order_id = r.order_id AND a.action IN ? AND a.actor_kind <> '')", m.state, m.actions).
			Scan(&recorded).Error
		if err != nil {
			return tr, err
		}
		tr.movements, tr.recorded = tr.movements+all, tr.recorded+recorded
		if recorded != all {
			tr.violations = append(tr.violations, fmt.Sprintf("%d of %d %s %s have no actor in the audit trail", all-recorded, all, m.state, m.table))
		}
	}
	return tr, nil
}
