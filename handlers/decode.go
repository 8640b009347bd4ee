package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/binding"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// decode reads an operation's input into dst, the one way every handler
// takes it: a page's form by dst's form tags, the API's JSON by its json tags.
func decode(c *gin.Context, dst any) error {
	if isPage(c) {
		postForm(c)
		return binding.MapFormWithTag(dst, c.Request.PostForm, "form")
	}
	return decodeJSON(c, dst)
}

// decodeNone reads no input: a form, or an empty body or {} from the API.
func decodeNone(c *gin.Context) error {
	if isPage(c) {
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, middleware.MaxBodyBytes))
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return err
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	var none struct{}
	return decodeJSON(c, &none)
}

// jsonObjects refuses a JSON body that is no object before any key is
// claimed: no operation takes one, and Go's decoder reads null as {}.
func (s *Server) jsonObjects(c *gin.Context) {
	if !sentJSON(c) {
		return
	}
	body, err := middleware.ReadBody(c) // the middleware's fingerprint reads the same bytes
	if err != nil {
		return // the middleware, or the handler's decoder, refuses it
	}
	if kind := jsonValueKind(bytes.TrimLeft(body, " \t\r\n")); kind != "" {
		s.fail(c, problem.MalformedRequest.With("The body must be a JSON object, not "+kind+"."))
	}
}

// jsonValueKind names the JSON value body starts with; "" for an object.
func jsonValueKind(body []byte) string {
	switch {
	case len(body) == 0:
	case body[0] == '[':
		return "array"
	case body[0] == '"':
		return "string"
	case bytes.HasPrefix(body, []byte("null")):
		return "null"
	case bytes.HasPrefix(body, []byte("true")), bytes.HasPrefix(body, []byte("false")):
		return "boolean"
	case strings.IndexByte("-0123456789", body[0]) >= 0:
		return "number"
	}
	return ""
}

// sentJSON is whether the request's body is application/json.
func sentJSON(c *gin.Context) bool {
	return middleware.MediaType(c.GetHeader("Content-Type")) == "application/json"
}

// decodeJSON reads application/json: at most 1 MiB, one value, no unknown fields.
func decodeJSON(c *gin.Context, dst any) error {
	if !sentJSON(c) {
		return problem.UnsupportedMediaType.With(fmt.Sprintf("Send the body as application/json, not %q.", c.GetHeader("Content-Type")))
	}
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, middleware.MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		return nil
	}
	var tooLarge *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return problem.TooLarge.With(fmt.Sprintf("The body is larger than %d bytes.", tooLarge.Limit))
	case errors.As(err, &typeErr):
		return models.Invalid(models.FieldError{Field: typeErr.Field, Message: "must be " + jsonKind(typeErr.Type.Kind())})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return models.Invalid(models.FieldError{Field: field, Message: "is not a field of this request"})
	case errors.Is(err, io.EOF):
		return problem.MalformedRequest.With("The body is empty.")
	}
	return problem.MalformedRequest.With("The body is not valid JSON for this endpoint: " + err.Error())
}

// postForm reads a form, bounded: one cut off reads as empty fields.
func postForm(c *gin.Context) url.Values {
	_ = c.Request.ParseForm()
	return c.Request.PostForm
}

// jsonKind names what a JSON field must be, in JSON's words, not Go's.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
