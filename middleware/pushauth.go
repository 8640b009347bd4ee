package middleware

// Pushed answers are signed. Anyone who can connect to the database can
// NOTIFY, a read-only role included, so an instance keeps a pushed answer
// only if it carries an HMAC-SHA256, under Config.PushSecret (never in the
// database), of the channel and the exact bytes of the message. The MAC
// covers every byte the receiver reads, and the channel, so that a payload
// is not kept in another schema's shop. It is checked before the JSON is
// parsed, so no second encoding of the fields has ambiguities to exploit;
// the channel, an identifier, cannot hold the NUL that ends it.
//
// Anyone who can LISTEN can read a payload and send it again: harmless, as
// it is a committed answer, kept only until its key's expiry. A push is
// signed, not encrypted.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"sync/atomic"
)

// MinPushSecret is the shortest Config.PushSecret accepted, in bytes.
const MinPushSecret = 32

// pushLabel opens every MAC: a signature made for anything else with the
// same secret is never a push's.
const pushLabel = "idempotency push v1\x00"

// macLen is the length of a payload's MAC as sent: base64 of a SHA-256 HMAC.
var macLen = base64.StdEncoding.EncodedLen(sha256.Size)

// pushAuth signs this instance's pushes and checks the others'.
type pushAuth struct {
	secret  []byte
	refused atomic.Uint64 // payloads dropped because their MAC failed
}

func (a *pushAuth) mac(channel string, msg []byte) []byte {
	h := hmac.New(sha256.New, a.secret)
	h.Write([]byte(pushLabel))
	h.Write([]byte(channel))
	h.Write([]byte{0})
	h.Write(msg)
	return h.Sum(nil)
}

// sign is the payload that carries msg on channel: its MAC, then msg.
func (a *pushAuth) sign(channel string, msg []byte) string {
	return base64.StdEncoding.EncodeToString(a.mac(channel, msg)) + string(msg)
}

// verify returns the message of a payload on channel whose MAC is this
// secret's, in constant time; ok is false for any other payload.
func (a *pushAuth) verify(channel, payload string) (msg []byte, ok bool) {
	if len(payload) < macLen {
		return nil, false
	}
	want, err := base64.StdEncoding.Strict().DecodeString(payload[:macLen]) // one spelling per MAC
	if err != nil || len(want) != sha256.Size {
		return nil, false
	}
	msg = []byte(payload[macLen:])
	if !hmac.Equal(want, a.mac(channel, msg)) {
		return nil, false
	}
	return msg, true
}

// verified is the message of a payload on channel signed with the push
// secret. One that is not is dropped, counted and logged: nothing of it is
// read.
func (p *pusher) verified(channel, payload string) ([]byte, bool) {
	msg, ok := p.auth.verify(channel, payload)
	if !ok {
		p.auth.refused.Add(1)
		p.logger.Warn("idempotency: dropped a pushed answer not signed with the push secret (forged, or from an instance with another secret)",
			"channel", channel, "bytes", len(payload))
	}
	return msg, ok
}

// PushesRefused is how many pushed answers this instance dropped because
// they were not signed with its PushSecret: forged, or sent by an instance
// configured with another secret.
func (m *Idempotency) PushesRefused() uint64 {
	if m.push == nil {
		return 0
	}
	return m.push.auth.refused.Load()
}
