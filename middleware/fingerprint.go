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

// A request's hashes. The fingerprint covers everything that makes two
// requests the same operation (method, route, path parameters, query, media
// type, canonical body); the raw digest, the same as the request brought
// it. With Config.DigestKey both are HMAC-SHA256 under a key the database
// never holds, so that a row tells nothing of a body carrying a secret (a
// sign-up's password); a keyed fingerprint is written "h1." and base64url,
// never taken for a plain one (64 hex digits), and a row from before the
// key still matches its request by the plain fingerprint, computed too.

// FormKeyField is the form field that carries the idempotency key of an
// HTML form post.
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
	// errBodyKeysCollide: encoding/json matches object keys to fields
	// case-insensitively and keeps the last, while RFC 8785 keeps both and
	// sorts them; such a body would have one fingerprint and two meanings.
	errBodyKeysCollide = errors.New("the request body has an object whose keys differ only in case; send each key once")
)

// request is what the fingerprint covers.
type request struct {
	Method      string
	Route       string // the route template, e.g. /api/v1/orders/:id/payments
	Params      gin.Params
	Query       url.Values
	ContentType string
	Body        []byte
}

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
	key = bytes.Clone(key)
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

// raw hashes the request byte for byte, its query as sent. Equal digests
// mean equal fingerprints, so a request with a cached answer's digest is
// replayed without canonicalising its body; unequal ones say nothing (the
// same JSON may be written two ways).
func (d digester) raw(r request, rawQuery string) [sha256.Size]byte {
	var buf [256]byte
	head := targetFields(buf[:0], r)
	head = field(head, rawQuery)
	head = field(head, r.ContentType)
	head = binary.AppendUvarint(head, uint64(len(r.Body)))
	return d.sum(head, r.Body)
}

// fingerprints are r's fingerprint under d and, when d is keyed, the plain
// one a row from before the key may hold (else ""). The body is
// canonicalised: JSON by RFC 8785 (key order and whitespace do not count),
// a form as sorted fields without the key field, anything else byte for
// byte; a body whose meaning cannot be pinned down is an error. The media
// type counts: the same bytes as another type are another request.
func (d digester) fingerprints(r request) (fingerprint, plain string, err error) {
	body, err := canonicalBody(r.ContentType, r.Body)
	if err != nil {
		return "", "", err
	}
	head := targetFields(make([]byte, 0, 256), r)
	head = field(head, r.Query.Encode())
	head = field(head, mediaType(r.ContentType))
	head = binary.AppendUvarint(head, uint64(len(body)))
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

// targetOf hashes what a request acts on (which order to pay): a released
// key may be retried with a corrected body or query, never another target.
func targetOf(r request) string {
	sum := sha256.Sum256(targetFields(make([]byte, 0, 128), r))
	return hex.EncodeToString(sum[:])
}

// TargetOf is the Target a key's row holds for a request to route with
// params: a reader who knows the candidates (a user's orders) can tell
// which one the key's request named, answered or not.
func TargetOf(method, route string, params gin.Params) string {
	return targetOf(request{Method: method, Route: route, Params: params})
}

// targetFields appends to buf the method, route and path parameters.
func targetFields(buf []byte, r request) []byte {
	buf = field(buf, r.Method)
	buf = field(buf, r.Route)
	for _, p := range r.Params {
		buf = field(buf, p.Key)
		buf = field(buf, p.Value)
	}
	return buf
}

// field appends s length-prefixed, so that no two different lists of fields
// hash the same bytes.
func field(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// mediaType is the lower-cased media type of a Content-Type, without
// parameters; empty when there is none or it does not parse.
func mediaType(contentType string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

func canonicalBody(contentType string, body []byte) ([]byte, error) {
	switch mt := mediaType(contentType); {
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

// checkKeysApart refuses valid JSON with an object, at any depth, two of
// whose keys are equal under the case folding encoding/json uses to match
// keys to fields (bytes.EqualFold). jcs already refuses exact repeats.
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

// foldKey maps s to one representative of its case-folding class: each
// rune becomes the least rune of its unicode.SimpleFold orbit, so
// foldKey(a) == foldKey(b) exactly when strings.EqualFold(a, b).
func foldKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}
