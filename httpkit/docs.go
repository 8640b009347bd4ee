package httpkit

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/openapi"
)

// OpenAPIJSON and OpenAPIYAML serve the API's OpenAPI document;
// APIReference is the human-readable API reference: Redoc, vendored in
// static/, rendering /openapi.json in the browser.
var (
	OpenAPIJSON  = document("application/json", openapi.JSON)
	OpenAPIYAML  = document("application/yaml", openapi.YAML)
	APIReference = document("text/html; charset=utf-8", []byte(apiReferencePage))
)

// document serves body, which a cache may keep five minutes.
func document(contentType string, body []byte) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=300")
		c.Data(http.StatusOK, contentType, body)
	}
}

const apiReferencePage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shop API reference</title>
</head>
<body>
<redoc spec-url="/openapi.json"></redoc>
<noscript><p>This page needs JavaScript. The document itself is at <a href="/openapi.yaml">/openapi.yaml</a> and <a href="/openapi.json">/openapi.json</a>.</p></noscript>
<script src="/static/redoc.standalone.js"></script>
</body>
</html>
`
