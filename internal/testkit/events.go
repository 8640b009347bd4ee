package testkit

import (
	"fmt"

	"gorm.io/gorm"
)

// EventAudit is what the outbox holds against the facts it reports, and
// what in them breaks "one event per fact".
type EventAudit struct {
	Events     int64
	Violations []string
}

// eventFacts are, for each event type, the rows whose facts it reports:
// each must have its event, "<type>:<row id>", and the type must have no
// other events. A declined payment a late charge made succeeded, or a
// failed refund a late refund made succeeded, keeps its first event too:
// those two types are only checked one way.
var eventFacts = []struct {
	typ, table, where string
	exact             bool
}{
	{"order.placed", "orders", "TRUE", true},
	{"order.paid", "payments", "status = 'succeeded'", true},
	{"order.payment_declined", "payments", "status = 'declined'", false},
	{"order.refunded", "refunds", "state = 'succeeded'", true},
	{"order.refund_failed", "refunds", "state = 'failed'", false},
	{"order.cancelled", "orders", "status = 'cancelled'", true},
}

// AuditEvents checks, from the tables alone, that every fact has its one
// event and, for the facts that do not change, that no event reports a
// fact that is not there.
func AuditEvents(db *gorm.DB) (EventAudit, error) {
	var a EventAudit
	if err := db.Raw(`SELECT count(*) FROM events`).Scan(&a.Events).Error; err != nil {
		return a, err
	}
	for _, f := range eventFacts {
		var missing []string
		err := db.Raw(fmt.Sprintf(`SELECT f.id FROM %s f WHERE %s AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = ? || f.id)`, f.table, f.where), f.typ+":").
			Scan(&missing).Error
		if err != nil {
			return a, fmt.Errorf("%s: %w", f.typ, err)
		}
		for _, id := range missing {
			a.Violations = append(a.Violations, fmt.Sprintf("a fact of %s %s without its %s event", f.table, id, f.typ))
		}
		var facts, events int64
		if err := db.Raw(fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s`, f.table, f.where)).Scan(&facts).Error; err != nil {
			return a, err
		}
		if err := db.Raw(`SELECT count(*) FROM events WHERE type = ?`, f.typ).Scan(&events).Error; err != nil {
			return a, err
		}
		if f.exact && events != facts {
			a.Violations = append(a.Violations, fmt.Sprintf("%d %s events for %d facts", events, f.typ, facts))
		}
	}
	return a, nil
}
