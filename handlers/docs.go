package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/openapi"
)

// openapiJSON and openapiYAML serve the API's OpenAPI document.
func (s *Server) openapiJSON(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=300")
	c.Data(http.StatusOK, "application/json", openapi.JSON)
}

func (s *Server) openapiYAML(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=300")
	c.Data(http.StatusOK, "application/yaml", openapi.YAML)
}
