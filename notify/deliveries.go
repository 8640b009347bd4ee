package notify

import (
	"cmp"
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/shop/shop/database"
	"github.com/shop/shop/models"
)

// Deliveries lists up to limit webhook deliveries, newest first, each with
// its attempts in order, from after p; more says whether any follow.
func Deliveries(ctx context.Context, db *gorm.DB, p *database.Position, limit int) ([]models.WebhookDelivery, bool, error) {
	q := db.WithContext(ctx).Preload("AttemptLog", func(db *gorm.DB) *gorm.DB { return db.Order("id") })
	return database.Page[models.WebhookDelivery](q, p, limit)
}

// Redeliver makes a delivery due at once, whatever its state, so that a
// sender posts it again, with its webhook-id and body, and records the
// attempt; one more failure fails a delivery whose attempts ran out. It
// lets go of a sender's claim too: a post in flight then records its
// attempt but not its outcome, so that it cannot mark the delivery done
// over the redelivery. It answers the delivery as it now stands,
// models.ErrNotFound for none.
func Redeliver(ctx context.Context, tx *gorm.DB, id string) (models.WebhookDelivery, error) {
	var d models.WebhookDelivery
	res := tx.WithContext(ctx).Model(&d).Where("id = ?", id).Updates(map[string]any{"state": models.DeliveryPending,
		"next_attempt_at": time.Now().UTC(), "finished_at": nil, "claimed_by": nil, "claimed_until": nil})
	if res.Error != nil || res.RowsAffected == 0 {
		return d, cmp.Or(res.Error, error(models.ErrNotFound))
	}
	err := tx.WithContext(ctx).Preload("AttemptLog", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).Take(&d, "id = ?", id).Error
	return d, err
}
