package httpkit

import (
	"net/http"

	"github.com/gin-gonic/gin"

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
