package handlers

import (
	"crypto/hkdf"
	"crypto/sha256"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop/shop/middleware"
)

// pushSecretLabel separates the push key from every other key the session
// secret yields (the cookie's): knowing one tells nothing of the other.
const pushSecretLabel = "idempotency push"

// pushSecret is the key the idempotency middleware signs the answers it
// pushes between instances with (middleware.Config.PushSecret), derived
// from the session secret, which every instance of a deployment shares and
// the database never holds. None when no session secret was configured:
// each process would make its own, so no other instance could check its
// pushes, and answers are not pushed.
func pushSecret(sessionSecret []byte) []byte {
	if len(sessionSecret) == 0 {
		return nil
	}
	key, err := hkdf.Key(sha256.New, sessionSecret, nil, pushSecretLabel, middleware.MinPushSecret)
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
