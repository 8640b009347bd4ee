package main

import (
	"context"
	"fmt"
	"time"

	"github.com/shop/shop/internal/testkit"
)

// findings is the end-of-run audit.
type findings struct {
	money      testkit.MoneyAudit
	stalled    []string
	missing    int // answered effects absent from the database
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
	stock, err := testkit.AuditStock(f.db.WithContext(ctx), t.stock)
	if err != nil {
		return a, err
	}
	a.violations = append(a.violations, stock...)
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
