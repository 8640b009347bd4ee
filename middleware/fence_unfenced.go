//go:build unfencedclaim

package middleware

// claimFence, in a build with the planted bug (-tags unfencedclaim), takes a
// key whatever its state, so that two requests with one key can both run.
// TestLinearizabilityCatchesAnUnfencedClaim shows that the checker fails
// such a server.
const claimFence = "TRUE"
