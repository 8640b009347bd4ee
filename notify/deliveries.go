package notify

import (
	"context"

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
