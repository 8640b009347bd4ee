package httpkit

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"
)

// Healthz answers 200 while the process serves.
func Healthz(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }

// Readyz answers 200 once the database answers and has the migrations' table.
func Readyz(db *gorm.DB, table any) gin.HandlerFunc {
	return func(c *gin.Context) {
		db := db.WithContext(c.Request.Context())
		if sqlDB, err := db.DB(); err != nil || sqlDB.PingContext(c.Request.Context()) != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "database unreachable"})
			return
		}
		if !db.Migrator().HasTable(table) {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "migrations not applied"})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	}
}
