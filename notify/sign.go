package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks signing, held to the specification's test vector (tests):
// no library for it is served to this build.

// ParseSecret reads a Standard Webhooks secret: "whsec_" and the base64 of
// the key, at least 24 bytes of it.
func ParseSecret(s string) ([]byte, error) {
	raw, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, errors.New(`want "whsec_" followed by the base64 of a random key (e.g. whsec_$(head -c 32 /dev/urandom | base64))`)
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, errors.New(`the part after "whsec_" is not standard base64`)
	}
	if len(key) < 24 {
		return nil, errors.New("the key is shorter than 24 bytes: make it of at least 24 random bytes (32 is usual)")
	}
	return key, nil
}

// Sign is the webhook-signature of one message: "v1," and the base64 of
// HMAC-SHA256, keyed with the secret, of "id.timestamp.body".
func Sign(key []byte, id string, at time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
