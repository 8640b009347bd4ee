package middleware

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/dunglas/httpsfv"
	"github.com/gin-gonic/gin"
)

const maxKeyLength = 255

var (
	errKeyMissing = errors.New("the Idempotency-Key header (or the idempotency_key form field) is missing")
	errKeyEmpty   = errors.New("the idempotency key is empty")
	errKeyLong    = errors.New("the idempotency key is longer than 255 characters")
	errKeyChars   = errors.New("the idempotency key must be printable ASCII")
	errKeyList    = errors.New("send exactly one Idempotency-Key header or idempotency_key field")
	errKeySF      = errors.New(`a quoted Idempotency-Key must be an RFC 8941 string without parameters, e.g. "8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	errKeyBare    = errors.New("a bare Idempotency-Key must be printable ASCII without spaces, quotes or commas")
)

// parseKeyHeader decodes the Idempotency-Key header: an RFC 8941 sf-string
// ("abc"), as the IETF draft has it, or bare (abc), naming the same key.
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

const keyContextKey = "idempotency.key"

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
