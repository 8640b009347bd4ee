package main

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// auditReceipts: once the relays have caught up (a minute at most), one
// receipt per payment settled paid (an order charged twice, by a late
// charge, gets two) and per refund that succeeded — no fewer, and, through
// the receipts' inbox, no more.
func auditReceipts(ctx context.Context, db *gorm.DB) ([]string, error) {
	var receipts, paid, refunded int64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		for _, q := range []struct {
			n     *int64
			table string
			where string
		}{{&receipts, "receipts", "1 = 1"}, {&paid, "payments", "status = 'succeeded'"}, {&refunded, "refunds", "state = 'succeeded'"}} {
			if err := db.WithContext(ctx).Table(q.table).Where(q.where).Count(q.n).Error; err != nil {
				return nil, err
			}
		}
		if receipts == paid+refunded {
			return nil, nil
		}
		if time.Now().After(deadline) {
			return []string{fmt.Sprintf("%d receipts for %d payments settled paid and %d refunds succeeded", receipts, paid, refunded)}, nil
		}
	}
}
