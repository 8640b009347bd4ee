// Package openapi embeds the OpenAPI 3.1 document of the JSON API,
// openapi.yaml, written by hand and checked against every response the API
// tests receive (tests/contract_test.go), and the page that renders it.
package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"

	"github.com/goccy/go-yaml"
)

// YAML is the document as written.
//
//go:embed openapi.yaml
var YAML []byte

// Reference is the human-readable API reference: Redoc, vendored in
// static/, rendering /openapi.json in the browser.
//
//go:embed reference.html
var Reference []byte

// JSON is the same document as JSON, in the same order.
var JSON = func() []byte {
	compact, err := yaml.YAMLToJSON(YAML)
	if err != nil {
		panic("openapi: openapi.yaml is not valid YAML: " + err.Error())
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		panic("openapi: openapi.yaml does not convert to JSON: " + err.Error())
	}
	return out.Bytes()
}()
