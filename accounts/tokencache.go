package accounts

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/shop/shop/models"
)

// TokenCache keeps this instance's successful bearer-token lookups for TTL. A
// failed lookup is never kept, so a token issued on any instance works at
// once; a hit still checks expiry; a revocation made here works here at once.
type TokenCache struct {
	ttl     time.Duration
	lookups *otter.Cache[[sha256.Size]byte, tokenLookup] // by the token's SHA-256: the row's token_hash is its hex
}

// tokenLookup is a token and its user as read at read, or a revocation made here.
type tokenLookup struct {
	token models.APIToken
	user  models.User
	read  time.Time
}

// NewTokenCache makes a cache that trusts a lookup for ttl. It holds 10,000
// lookups (a few megabytes); beyond, the least useful are read again when used.
func NewTokenCache(ttl time.Duration) *TokenCache {
	return &TokenCache{ttl: ttl, lookups: otter.Must(&otter.Options[[sha256.Size]byte, tokenLookup]{MaximumSize: 10_000})}
}

// lookUp is what the cache knows, at now, of the token with this sum: a
// lookup younger than TTL, or a revocation made here; a nil cache knows nothing.
func (c *TokenCache) lookUp(sum [sha256.Size]byte, now time.Time) (tokenLookup, bool) {
	if c == nil {
		return tokenLookup{}, false
	}
	l, ok := c.lookups.GetIfPresent(sum)
	// A clock set back makes a lookup stale, not younger.
	fresh := l.token.RevokedAt != nil || !now.Before(l.read) && now.Sub(l.read) < c.ttl
	return l, ok && fresh
}

// keep records a successful lookup, unless this instance revoked the token
// meanwhile: a lookup read before the revocation must not bring it back.
func (c *TokenCache) keep(sum [sha256.Size]byte, l tokenLookup) {
	if c == nil {
		return
	}
	c.lookups.Compute(sum, func(old tokenLookup, found bool) (tokenLookup, otter.ComputeOp) {
		if found && old.token.RevokedAt != nil {
			return old, otter.CancelOp
		}
		return l, otter.WriteOp
	})
}

// revoked records that this instance revoked the token at at.
func (c *TokenCache) revoked(t models.APIToken, at time.Time) {
	if c == nil {
		return
	}
	var sum [sha256.Size]byte // the key: the token's SHA-256, whose hex the row keeps
	_, _ = hex.Decode(sum[:], []byte(t.TokenHash))
	t.RevokedAt = &at
	c.lookups.Set(sum, tokenLookup{token: t, read: at})
}
