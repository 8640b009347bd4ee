// Package shopclient is the Shop API's Go client, generated from
// openapi/openapi.yaml by oapi-codegen with its default configuration
// (oapi-codegen.yaml). Regenerate it after changing the document:
//
//	go generate ./clients/go
//
// .ci/run regenerates it and fails if the result differs from the committed
// file. Every error answer decodes to one type, Problem (see DecodeProblem).
package shopclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../../openapi/openapi.yaml
