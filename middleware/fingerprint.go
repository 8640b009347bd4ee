package middleware

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"mime"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/gowebpki/jcs"
)

// FormKeyField is the form field that carries the idempotency key of an
// HTML form post.
const FormKeyField = "idempotency_key"

var (
	errBodyJSON = errors.New("the request body is not valid JSON")
	errBodyForm = errors.New("the request body is not a valid form")
)

// Request is what the fingerprint covers.
type Request struct {
	Method      string
	Route       string // the route template, e.g. /api/v1/orders/:id/payments
	Params      gin.Params
	Query       url.Values
	ContentType string
	Body        []byte
}

// Fingerprint hashes everything that makes two requests the same operation.
// Bodies are canonicalised first: JSON by RFC 8785, so key order and
// whitespace do not count; forms as sorted fields without the key field;
// anything else byte for byte. Invalid JSON or form bodies are an error: a
// request whose meaning cannot be pinned down cannot be claimed.
func Fingerprint(r Request) (string, error) {
	body, err := canonicalBody(r.ContentType, r.Body)
	if err != nil {
		return "", err
	}
	// The fields before the body go through one small buffer, and the body
	// is hashed where it lies: no copy of it, one allocation for the rest.
	head := make([]byte, 0, 256)
	head = field(head, r.Method)
	head = field(head, r.Route)
	// The route template fixes the parameters and their order; each name and
	// value is a field of its own, so no value can pass for another.
	for _, p := range r.Params {
		head = field(head, p.Key)
		head = field(head, p.Value)
	}
	head = field(head, r.Query.Encode())
	// The media type counts: the same bytes sent as another type are another
	// request, which the handler may well refuse.
	head = field(head, mediaType(r.ContentType))
	head = binary.AppendUvarint(head, uint64(len(body)))
	h := sha256.New()
	h.Write(head)
	h.Write(body)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])), nil
}

// Target hashes what a request acts on: method, route and path parameters
// (which order to pay, say). A released key may be retried with a corrected
// body or query, never against another target.
func Target(r Request) string {
	buf := make([]byte, 0, 128)
	buf = field(buf, r.Method)
	buf = field(buf, r.Route)
	for _, p := range r.Params {
		buf = field(buf, p.Key)
		buf = field(buf, p.Value)
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:])
}

// mediaType is the lower-cased media type of a Content-Type, without
// parameters; empty when there is none or it does not parse.
func mediaType(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

const formType = "application/x-www-form-urlencoded"

// field appends s length-prefixed, so that no two different lists of fields
// hash the same bytes.
func field(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func canonicalBody(contentType string, body []byte) ([]byte, error) {
	switch mt := mediaType(contentType); {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		canonical, err := jcs.Transform(body)
		if err != nil {
			return nil, errBodyJSON
		}
		return canonical, nil
	case mt == formType:
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, errBodyForm
		}
		form.Del(FormKeyField)
		return []byte(form.Encode()), nil
	}
	return body, nil
}
