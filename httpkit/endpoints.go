package httpkit

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/shop/shop/openapi"
)

// OpenAPIJSON and OpenAPIYAML serve the API's OpenAPI document, and
// APIReference the page that renders it.
var (
	OpenAPIJSON  = document("application/json", openapi.JSON)
	OpenAPIYAML  = document("application/yaml", openapi.YAML)
	APIReference = document("text/html; charset=utf-8", openapi.Reference)
)

// document serves body, which a cache may keep five minutes.
func document(contentType string, body []byte) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=300")
		c.Data(http.StatusOK, contentType, body)
	}
}

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
