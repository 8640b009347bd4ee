package accounts

import (
	"gorm.io/gorm"

	"github.com/shop/shop/models"
)

// StaffNow refuses (models.ErrForbidden) a user who is not staff in the
// database as tx reads it, whatever a cached lookup still says: a staff
// act that moves money or stock calls it in the transaction that writes
// the act, so that a removal made on any instance is seen at once.
func StaffNow(tx *gorm.DB, userID string) error {
	var n int64
	if err := tx.Model(&models.User{}).Where("id = ? AND role = ?", userID, models.Staff).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return models.ErrForbidden
	}
	return nil
}
