package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// decodeJSON reads a JSON request body into dst: application/json only, at
// most 1 MiB, one value, no unknown fields.
func decodeJSON(c *gin.Context, dst any) error {
	if mediaType, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type")); mediaType != "application/json" {
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
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return problem.MalformedRequest.With("The body must be a JSON object, not " + typeErr.Value + ".")
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

// postForm reads a form's body, the one way the pages take input: the
// idempotency middleware, or limitBody, has already bounded its size; a
// form cut off reads as empty fields.
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
