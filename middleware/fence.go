//go:build !unfencedclaim

package middleware

// claimFence is the claim's guard on a key row that exists: it is taken
// only when claimable. The build tag unfencedclaim drops it
// (fence_unfenced.go).
const claimFence = claimableSQL
