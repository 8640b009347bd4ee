package middleware

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"mime"
	"net/url"
	"strings"
	"sync"
	"unicode"

	"github.com/gin-gonic/gin"
	"github.com/gowebpki/jcs"
)

// A request's hashes. With Config.DigestKey they are HMAC-SHA256 under a key
// the database never holds, so that a row tells nothing of a body carrying a
// secret (a password); a keyed fingerprint is "h1." and base64url, never a
// plain one's 64 hex digits, and older rows match by the plain one.

// FormKeyField is the form field that carries an HTML form's key.
const FormKeyField = "idempotency_key"

// MinDigestKey is the shortest Config.DigestKey accepted, in bytes.
const MinDigestKey = 32

const (
	keyedPrefix = "h1."
	formType    = "application/x-www-form-urlencoded"
)

var (
	errBodyJSON = errors.New("the request body is not valid JSON")
	errBodyForm = errors.New("the request body is not a valid form")
	// errBodyKeysCollide: encoding/json folds keys' case, RFC 8785 does not: one fingerprint, two meanings.
	errBodyKeysCollide = errors.New("the request body has an object whose keys differ only in case; send each key once")
)

type request struct {
	Method      string
	Route       string // the route template, e.g. /api/v1/orders/:id/payments
	Params      gin.Params
	Query       url.Values
	ContentType string
	Body        []byte
}

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
	key = bytes.Clone(key)
	return digester{keyed: &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

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

// raw hashes the request byte for byte: equal digests mean equal
// fingerprints, unequal ones nothing (JSON may be written two ways).
func (d digester) raw(r request, rawQuery string) [sha256.Size]byte {
	var buf [256]byte
	head := targetFields(buf[:0], r)
	head = field(head, rawQuery)
	head = field(head, r.ContentType)
	head = binary.AppendUvarint(head, uint64(len(r.Body)))
	return d.sum(head, r.Body)
}

// fingerprints are r's fingerprint, of all that makes two requests one operation, and, keyed, the
// plain one. The body is canonical (JSON by RFC 8785, a form sorted without its key field), or an
// error when its meaning cannot be pinned down.
func (d digester) fingerprints(r request) (fingerprint, plain string, err error) {
	body, err := canonicalBody(r.ContentType, r.Body)
	if err != nil {
		return "", "", err
	}
	head := targetFields(make([]byte, 0, 256), r)
	head = field(head, r.Query.Encode())
	head = field(head, MediaType(r.ContentType)) // the same bytes as another type are another request
	head = binary.AppendUvarint(head, uint64(len(body)))
	sum := digester{}.sum(head, body)
	plain = hex.EncodeToString(sum[:])
	if d.keyed == nil {
		return plain, "", nil
	}
	sum = d.sum(head, body)
	return keyedPrefix + base64.RawURLEncoding.EncodeToString(sum[:]), plain, nil
}

// sameRequest: stored, a key's fingerprint, is want's.
func sameRequest(stored string, want IdempotencyKey) bool {
	return stored == want.Fingerprint || (want.plainFingerprint != "" && stored == want.plainFingerprint)
}

// TargetOf hashes what a request acts on (which order to pay): a released key may be retried with
// a corrected body, never another target; a reader can tell which candidate a key named.
func TargetOf(method, route string, params gin.Params) string {
	sum := sha256.Sum256(targetFields(make([]byte, 0, 128), request{Method: method, Route: route, Params: params}))
	return hex.EncodeToString(sum[:])
}

func targetFields(buf []byte, r request) []byte {
	buf = field(buf, r.Method)
	buf = field(buf, r.Route)
	for _, p := range r.Params {
		buf = field(buf, p.Key)
		buf = field(buf, p.Value)
	}
	return buf
}

// field appends s length-prefixed: no two lists of fields hash alike.
func field(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// MediaType is a Content-Type's lower-cased type, its parameters ignored; empty if none or its
// type is invalid: the one reading of a request's type, for the fingerprint and for the
// handlers that decode its body.
func MediaType(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

func canonicalBody(contentType string, body []byte) ([]byte, error) {
	switch mt := MediaType(contentType); {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		canonical, err := jcs.Transform(body)
		if err != nil {
			return nil, errBodyJSON
		}
		return canonical, checkKeysApart(canonical)
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

// checkKeysApart refuses keys equal under encoding/json's case folding (jcs refuses exact repeats).
func checkKeysApart(canonical []byte) error {
	dec := json.NewDecoder(bytes.NewReader(canonical))
	// The open objects, innermost last; an array is a nil entry.
	type object struct {
		keys    map[string]bool // folded
		wantKey bool
	}
	var open []*object
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errBodyJSON
		}
		if len(open) > 0 && open[len(open)-1] != nil {
			top := open[len(open)-1]
			if key, ok := tok.(string); ok && top.wantKey {
				folded := foldKey(key)
				if top.keys[folded] {
					return errBodyKeysCollide
				}
				top.keys[folded], top.wantKey = true, false
				continue
			}
			top.wantKey = true // a value, or the object's end
		}
		switch tok {
		case json.Delim('{'):
			open = append(open, &object{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			open = append(open, nil)
		case json.Delim('}'), json.Delim(']'):
			open = open[:len(open)-1]
		}
	}
}

// foldKey maps each rune to the least of its unicode.SimpleFold orbit:
// foldKey(a) == foldKey(b) exactly when strings.EqualFold(a, b).
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}
