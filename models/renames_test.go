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
// The order and attempt tables as the version before the renames declared
// them, for GORM to make as it did then.
type earlierOrder struct {
	ID                 string  `gorm:"primaryKey;size:36"`
	UserID             string  `gorm:"size:36;not null;index:idx_orders_user_created,priority:1"`
	Status             string  `gorm:"size:16;not null"`
	Currency           string  `gorm:"size:3;not null"`
	TotalCents         int64   `gorm:"not null"`
	IdempotencyRef     string  `gorm:"size:80;not null;uniqueIndex"`
	PaymentLock        *string `gorm:"size:100"`
	PaymentLockedUntil *time.Time
	CreatedAt          time.Time `gorm:"not null;index:idx_orders_user_created,priority:2"`
}

func (earlierOrder) TableName() string { return "orders" }

type earlierAttempt struct {
	ID               string    `gorm:"primaryKey;size:36"`
	OrderID          string    `gorm:"size:36;not null;index"`
	Operation        string    `gorm:"size:80;not null;index"`
	ProviderKey      string    `gorm:"size:90;not null;uniqueIndex"`
	AmountCents      int64     `gorm:"not null"`
	Currency         string    `gorm:"size:3;not null"`
	PaymentMethod    string    `gorm:"size:64;not null"`
	State            string    `gorm:"size:16;not null;index"`
	ProviderChargeID string    `gorm:"size:64"`
	DeclineReason    string    `gorm:"size:200"`
	CreatedAt        time.Time `gorm:"not null"`
	UpdatedAt        time.Time `gorm:"not null"`
}

func (earlierAttempt) TableName() string { return "payment_attempts" }

// TestMigrateRenamesAnEarlierSchema: a database made by the version before
// the hold and the derived key were renamed keeps its orders, attempts and
// holds under the new names, on SQLite and PostgreSQL.
func TestMigrateRenamesAnEarlierSchema(t *testing.T) {
	db := testkit.NewDB(t)
	if err := db.AutoMigrate(&earlierOrder{}, &earlierAttempt{}); err != nil {
		t.Fatal(err)
	}
	holder, until := "idem_old/run", time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	created := until.Add(-time.Hour)
	if err := db.Create(&earlierOrder{ID: "6a0b6a4e-0d3c-4a53-9c62-1f9c1c8b7a01", UserID: "u1", Status: "pending", Currency: "USD",
		TotalCents: 1900, IdempotencyRef: "idem_old", PaymentLock: &holder, PaymentLockedUntil: &until, CreatedAt: created}).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Create(&earlierAttempt{ID: "a1", OrderID: "6a0b6a4e-0d3c-4a53-9c62-1f9c1c8b7a01", Operation: "idem_old", ProviderKey: "idem_old",
		AmountCents: 1900, Currency: "USD", PaymentMethod: "pm_card_visa", State: "in_doubt", CreatedAt: created, UpdatedAt: created}).Error; err != nil {
		t.Fatal(err)
	}
	if err := models.Migrate(db); err != nil {
		t.Fatal(err)
	}
	var order models.Order
	if err := db.Take(&order, "derived_key = ?", "idem_old").Error; err != nil {
		t.Fatalf("the order under its new column: %v", err)
	}
	if order.HeldBy == nil || *order.HeldBy != holder || order.HeldUntil == nil || !order.HeldUntil.Equal(until) {
		t.Fatalf("hold %v until %v; want idem_old/run until 10:00", order.HeldBy, order.HeldUntil)
	}
	var attempt models.PaymentAttempt
	if err := db.Take(&attempt, "derived_key = ?", "idem_old").Error; err != nil || attempt.State != models.InDoubt {
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
