package accounts

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
)

// SetRole gives the user with the email the role, and reports whether that
// changed anything; an error names an email no user has. The staff command
// calls it, nothing on the web.
func SetRole(ctx context.Context, db *gorm.DB, email string, role models.Role) (bool, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var found int64
	if err := db.WithContext(ctx).Model(&models.User{}).Where("email = ?", email).Count(&found).Error; err != nil {
		return false, err
	}
	if found == 0 {
		return false, fmt.Errorf("no user has the email %q: sign up first", email)
	}
	res := db.WithContext(ctx).Exec("UPDATE users SET role = ? WHERE email = ? AND role <> ?", role, email, role)
	return res.RowsAffected > 0, res.Error
}

// StaffNow refuses (models.ErrForbidden) a user who is not staff in the
// database as tx reads it, whatever a cached lookup says: a staff act that
// moves money or stock calls it in its own transaction, so that a removal
// made on any instance is seen at once.
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
