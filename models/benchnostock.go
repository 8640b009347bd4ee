//go:build benchnostock

package models

// A benchmark-only build, with -tags benchnostock: orders reserve nothing,
// so that scripts/bench can price the reservation against the same binary
// without it. Never a production build: stock is not kept.
func init() { reserving = false }
