package handlers

import (
	"crypto/hkdf"
	"crypto/sha256"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop/shop/middleware"
)

// The session secret, which every instance of a deployment shares and the
// database never holds, yields the other keys the instances share, each
// under its own label: knowing one tells nothing of another (the cookie's
// included). None when no session secret was configured: each process
// would make its own, and no other instance could check what it made.
type derivedKeys struct {
	// push signs the answers pushed between instances
	// (middleware.Config.PushSecret).
	push []byte
	// digest keys the hashes of requests kept in the key table
	// (middleware.Config.DigestKey), so that the table tells nothing of the
	// passwords a sign-up or a password change sent.
	digest []byte
}

func deriveKeys(sessionSecret []byte) derivedKeys {
	if len(sessionSecret) == 0 {
		return derivedKeys{}
	}
	return derivedKeys{
		push:   derive(sessionSecret, "idempotency push", middleware.MinPushSecret),
		digest: derive(sessionSecret, "idempotency digest", middleware.MinDigestKey),
	}
}

func derive(secret []byte, label string, n int) []byte {
	key, err := hkdf.Key(sha256.New, secret, nil, label, n)
	if err != nil {
		panic(err) // only a length HKDF cannot give, and 32 bytes it can
	}
	return key
}

// pushesRefused counts the pushed answers the middleware dropped because
// they were not signed with the push secret: forged, or from an instance
// with another SESSION_SECRET.
func pushesRefused(mw *middleware.Idempotency) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "shop_idempotency_pushes_refused_total",
		Help: "Answers pushed by other instances and dropped because their signature failed: forged, or sent under another SESSION_SECRET.",
	}, func() float64 { return float64(mw.PushesRefused()) })
}
