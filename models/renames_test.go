package models_test

import (
	"testing"
	"time"

	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
)

// TestMigrateRenamesAnEarlierSchema: a database made by the version before
// the hold and the derived key were renamed keeps its orders, attempts and
// holds under the new names, on SQLite and PostgreSQL.
func TestMigrateRenamesAnEarlierSchema(t *testing.T) {
	db := testkit.NewDB(t)
	for _, stmt := range []string{
		`CREATE TABLE orders (id varchar(36) PRIMARY KEY, user_id varchar(36) NOT NULL, status varchar(16) NOT NULL,
			currency varchar(3) NOT NULL, total_cents bigint NOT NULL, idempotency_ref varchar(80) NOT NULL,
			payment_lock varchar(100), payment_locked_until timestamp, created_at timestamp NOT NULL)`,
		`CREATE UNIQUE INDEX idx_orders_idempotency_ref ON orders (idempotency_ref)`,
		`CREATE TABLE payment_attempts (id varchar(36) PRIMARY KEY, order_id varchar(36) NOT NULL, operation varchar(80) NOT NULL,
			provider_key varchar(90) NOT NULL, amount_cents bigint NOT NULL, currency varchar(3) NOT NULL,
			payment_method varchar(64) NOT NULL, state varchar(16) NOT NULL, provider_charge_id varchar(64),
			decline_reason varchar(200), created_at timestamp NOT NULL, updated_at timestamp NOT NULL)`,
		`CREATE INDEX idx_payment_attempts_operation ON payment_attempts (operation)`,
		`INSERT INTO orders VALUES ('6a0b6a4e-0d3c-4a53-9c62-1f9c1c8b7a01', 'u1', 'pending', 'USD', 1900, 'idem_old',
			'idem_old/run', '2026-11-30 10:00:00', '2026-11-30 09:00:00')`,
		`INSERT INTO payment_attempts VALUES ('a1', '6a0b6a4e-0d3c-4a53-9c62-1f9c1c8b7a01', 'idem_old', 'idem_old', 1900, 'USD',
			'pm_card_visa', 'in_doubt', '', '', '2026-11-30 09:30:00', '2026-11-30 09:30:00')`,
	} {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := models.Migrate(db); err != nil {
		t.Fatal(err)
	}
	var order models.Order
	if err := db.Take(&order, "derived_key = ?", "idem_old").Error; err != nil {
		t.Fatalf("the order under its new column: %v", err)
	}
	if order.HeldBy == nil || *order.HeldBy != "idem_old/run" || order.HeldUntil == nil || !order.HeldUntil.Equal(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("hold %v until %v; want idem_old/run until 10:00", order.HeldBy, order.HeldUntil)
	}
	var attempt models.PaymentAttempt
	if err := db.Take(&attempt, "derived_key = ?", "idem_old").Error; err != nil || attempt.State != models.AttemptInDoubt {
		t.Fatalf("the attempt under its new column: %+v %v", attempt, err)
	}
	m := db.Migrator()
	for _, gone := range []struct{ table, column string }{{"orders", "idempotency_ref"}, {"orders", "payment_lock"}, {"orders", "payment_locked_until"}, {"payment_attempts", "operation"}} {
		if m.HasColumn(gone.table, gone.column) {
			t.Errorf("%s.%s is still there", gone.table, gone.column)
		}
	}
	if m.HasIndex("orders", "idx_orders_idempotency_ref") || !m.HasIndex("orders", "idx_orders_derived_key") {
		t.Errorf("the derived key's unique index was not moved to its new name")
	}
	dup := models.Order{ID: "7b0b6a4e-0d3c-4a53-9c62-1f9c1c8b7a02", UserID: "u1", Status: models.OrderPending, Currency: "USD", TotalCents: 1, DerivedKey: "idem_old"}
	if err := db.Create(&dup).Error; err == nil {
		t.Fatal("a second order with the same derived key was accepted: the unique index is gone")
	}
	if err := models.Migrate(db); err != nil {
		t.Fatalf("a second migration: %v", err)
	}
}
