package accounts

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/shop/shop/models"
)

// SetRole gives the user with the email the role: idempotent, reporting
// whether it changed anything; an error naming the email when there is no
// such user. Nothing on the web calls it: the staff command does.
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
