package middleware

// Intake: key, body and fingerprint, or a refusal before anything is claimed.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/dunglas/httpsfv"
	"github.com/gin-gonic/gin"
)

// OptionalKey, before Require, makes the key optional (sign-up): a request without one runs unguarded.
func OptionalKey(c *gin.Context) { c.Set(optionalKeyFlag, true) }

const (
	MaxBodyBytes    = 1 << 20 // bounds the body of an idempotent request
	maxKeyLength    = 255
	keyContextKey   = "idempotency.key"
	optionalKeyFlag = "idempotency.optional"
	// anonymousScope holds keys without a principal: a repeat is answered only if the same request.
	anonymousScope = "anonymous"
)

func (m *Idempotency) handle(c *gin.Context, mode Mode) {
	scope := m.cfg.Scope(c)
	switch {
	case scope == "" && c.GetBool(optionalKeyFlag):
		scope = anonymousScope
	case scope == "":
		m.cfg.Refuse(c, refuseUnauthenticated.with("Sign in first: idempotency keys belong to a user."))
		return
	}
	headerKey, headerErr := parseKeyHeader(c.Request.Header.Values("Idempotency-Key"))
	// Only a form may carry its key in its body: anything else is refused unread.
	isForm := MediaType(c.Request.Header.Get("Content-Type")) == formType
	if !isForm && headerErr != nil {
		m.refuseKey(c, headerErr)
		return
	}
	body, err := ReadBody(c)
	switch {
	case errors.Is(err, errBodyTooLarge):
		m.cfg.Refuse(c, refuseTooLarge.with(err.Error()))
		return
	case err != nil:
		m.cfg.Refuse(c, refuseMalformed.with(err.Error()))
		return
	}
	key, fromField, err := resolveKey(headerKey, headerErr, isForm, body)
	if err != nil {
		m.refuseKey(c, err)
		return
	}
	if fromField && headerKey != key && !errors.Is(headerErr, errKeyMissing) {
		m.logIgnoredHeader(c, key, headerKey, headerErr)
	}
	c.Set(keyContextKey, key)
	m.dispatch(c, mode, scope, key, body)
}

// dispatch replays a byte-identical repeat at once; anything else is fingerprinted.
func (m *Idempotency) dispatch(c *gin.Context, mode Mode, scope, key string, body []byte) {
	req := request{Method: c.Request.Method, Route: c.FullPath(), Params: c.Params, ContentType: c.Request.Header.Get("Content-Type"), Body: body}
	raw := m.digest.raw(req, c.Request.URL.RawQuery)
	sk := scopedKey{scope, key}
	var first *lookup
	if a, ok := m.answers.get(sk); ok {
		if a.raw == raw {
			m.replay(c, a, fromMemory, false)
			return
		}
	} else {
		first = m.lookup(c.Request.Context(), scope, key)
		if first.err == nil && phaseOf(first.found, m.now()) == phaseCompleted && bytes.Equal(first.found.RawDigest, raw[:]) {
			m.replayStored(c, first.found, raw, false)
			return
		}
	}
	req.Query = c.Request.URL.Query()
	fingerprint, plain, err := m.digest.fingerprints(req)
	if err != nil {
		m.cfg.Refuse(c, refuseMalformed.with(err.Error()))
		return
	}
	want := IdempotencyKey{Scope: scope, Key: key, Method: c.Request.Method, Route: c.FullPath(), Fingerprint: fingerprint, RawDigest: raw[:], Target: TargetOf(req.Method, req.Route, req.Params), plainFingerprint: plain}
	m.execute(c, want, mode, raw, first)
}

// ReadBody reads c's body whole, at most MaxBodyBytes, and puts it back for
// whoever reads it next: a second ReadBody is handed the same bytes, unread
// again. A body too large is put back as it came.
func ReadBody(c *gin.Context) ([]byte, error) {
	if read, ok := c.Request.Body.(*readBody); ok && read.Len() == len(read.whole) {
		return read.whole, nil
	}
	if c.Request.ContentLength > MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, MaxBodyBytes+1))
	if err != nil { // a body cut short: whoever reads it next is told so too, not handed an end
		c.Request.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), failedRead{err}))
		return nil, fmt.Errorf("the body could not be read: %w", err)
	}
	if len(body) > MaxBodyBytes {
		c.Request.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), c.Request.Body))
		return nil, errBodyTooLarge
	}
	c.Request.Body = &readBody{Reader: bytes.NewReader(body), whole: body}
	return body, nil
}

// readBody is a body ReadBody has read whole.
type readBody struct {
	*bytes.Reader
	whole []byte
}

func (*readBody) Close() error { return nil }

// failedRead is the rest of a body whose read failed: the same error, every time.
type failedRead struct{ err error }

func (f failedRead) Read([]byte) (int, error) { return 0, f.err }

// resolveKey prefers a form post's field, the key the page rendered, to the
// header: a browser may add an Idempotency-Key header of its own (Firefox can).
func resolveKey(headerKey string, headerErr error, isForm bool, body []byte) (key string, fromField bool, err error) {
	if isForm {
		if form, err := url.ParseQuery(string(body)); err == nil && form.Has(FormKeyField) {
			if len(form[FormKeyField]) > 1 {
				return "", true, errKeyList
			}
			fieldKey, err := checkKey(form.Get(FormKeyField))
			return fieldKey, true, err
		}
	}
	return headerKey, false, headerErr
}

// refuseKey answers a request without a usable key, unless it is optional.
func (m *Idempotency) refuseKey(c *gin.Context, err error) {
	switch {
	case errors.Is(err, errKeyMissing) && c.GetBool(optionalKeyFlag):
	case errors.Is(err, errKeyMissing):
		m.cfg.Refuse(c, refuseKeyMissing.with(err.Error()))
	default:
		m.cfg.Refuse(c, refuseKeyInvalid.with(err.Error()))
	}
}

// logIgnoredHeader notes a form post's ignored header, naming keys by hash.
func (m *Idempotency) logIgnoredHeader(c *gin.Context, fieldKey, headerKey string, headerErr error) {
	attrs := []any{"route", c.FullPath(), "field_key", redact(fieldKey), "field_key_bytes", len(fieldKey)}
	if headerErr != nil {
		attrs = append(attrs, "header_problem", headerErr.Error())
	} else {
		attrs = append(attrs, "header_key", redact(headerKey), "header_key_bytes", len(headerKey))
	}
	m.cfg.Logger.InfoContext(c.Request.Context(), "idempotency: a form post's Idempotency-Key header is ignored; its idempotency_key field is the key", attrs...)
}

var (
	errBodyTooLarge = fmt.Errorf("the body is larger than %d bytes", MaxBodyBytes)
	errKeyMissing   = errors.New("the Idempotency-Key header (or the idempotency_key form field) is missing")
	errKeyEmpty     = errors.New("the idempotency key is empty")
	errKeyLong      = errors.New("the idempotency key is longer than 255 characters")
	errKeyChars     = errors.New("the idempotency key must be printable ASCII")
	errKeyList      = errors.New("send exactly one Idempotency-Key header or idempotency_key field")
	errKeySF        = errors.New(`a quoted Idempotency-Key must be an RFC 8941 string without parameters, e.g. "8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	errKeyBare      = errors.New("a bare Idempotency-Key must be printable ASCII without spaces, quotes or commas")
)

// parseKeyHeader decodes the header: an RFC 8941 sf-string ("abc"), or bare (abc), the same key.
func parseKeyHeader(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", errKeyMissing
	case 1:
	default:
		return "", errKeyList
	}
	raw := strings.Trim(values[0], " \t")
	if raw == "" {
		return "", errKeyEmpty
	}
	if raw[0] != '"' {
		if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == ',' }) {
			return "", errKeyBare
		}
		return checkKey(raw)
	}
	item, err := httpsfv.UnmarshalItem([]string{raw})
	if err != nil {
		return "", errKeySF
	}
	key, ok := item.Value.(string)
	if !ok || len(item.Params.Names()) > 0 {
		return "", errKeySF
	}
	return checkKey(key)
}

func checkKey(key string) (string, error) {
	switch {
	case key == "":
		return "", errKeyEmpty
	case len(key) > maxKeyLength:
		return "", errKeyLong
	case strings.ContainsFunc(key, func(r rune) bool { return r < ' ' || r > '~' }):
		return "", errKeyChars
	}
	return key, nil
}

// RedactedKey names the request's idempotency key in logs without
// revealing it: 12 hex digits of its SHA-256; empty without a valid key.
func RedactedKey(c *gin.Context) string { return redact(c.GetString(keyContextKey)) }

func redact(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}
