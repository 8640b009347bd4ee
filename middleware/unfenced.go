//go:build unfencedclaim

package middleware

// A planted bug, built only with -tags unfencedclaim: the claim takes a
// key whatever its state, so that two requests with one key can both run.
// TestLinearizabilityCatchesAnUnfencedClaim shows that the checker fails
// such a server.
func init() { claimFence = "TRUE" }
