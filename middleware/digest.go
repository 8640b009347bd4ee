package middleware

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"sync"
)

// A plain SHA-256 of a body that carries a secret (a sign-up's password),
// kept in the key's row, lets anyone who can read the table test guesses
// at SHA-256's speed. With Config.DigestKey, a request's hashes are
// HMAC-SHA256 under a key the database never holds. A keyed fingerprint is
// written "h1." and base64url, never taken for a plain one (64 hex
// digits); a row from before the key was set still matches its request, by
// the plain fingerprint computed too.

// MinDigestKey is the shortest Config.DigestKey accepted, in bytes.
const MinDigestKey = 32

const keyedPrefix = "h1."

// digester makes a request's hashes: SHA-256, or HMAC-SHA256 under a key.
type digester struct {
	keyed *sync.Pool // of HMACs under the key; nil: plain SHA-256
}

func newDigester(key []byte) digester {
	if len(key) == 0 {
		return digester{}
	}
	if len(key) < MinDigestKey {
		panic("middleware: Config.DigestKey must be at least 32 bytes")
	}
	key = append([]byte(nil), key...)
	return digester{keyed: &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// sum hashes head then body, keyed or not.
func (d digester) sum(head, body []byte) [sha256.Size]byte {
	var h hash.Hash
	if d.keyed == nil {
		h = sha256.New()
	} else {
		h = d.keyed.Get().(hash.Hash)
		h.Reset()
		defer d.keyed.Put(h)
	}
	h.Write(head)
	h.Write(body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// fingerprints are r's fingerprint under d and, when d is keyed, the plain
// one a row from before the key may hold (else "").
func (d digester) fingerprints(r request) (fingerprint, plain string, err error) {
	head, body, err := fingerprinted(r)
	if err != nil {
		return "", "", err
	}
	sum := digester{}.sum(head, body)
	plain = hex.EncodeToString(sum[:])
	if d.keyed == nil {
		return plain, "", nil
	}
	sum = d.sum(head, body)
	return keyedPrefix + base64.RawURLEncoding.EncodeToString(sum[:]), plain, nil
}

// sameRequest: stored, a key's fingerprint, is want's request's.
func sameRequest(stored string, want IdempotencyKey) bool {
	return stored == want.Fingerprint || (want.plainFingerprint != "" && stored == want.plainFingerprint)
}
