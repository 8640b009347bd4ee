//go:build benchnowrites

package models

// A benchmark-only build, with -tags benchnowrites: orders reserve nothing
// and facts record no outbox event, so that scripts/bench can price those
// writes against the same binary without them. Never a production build:
// stock is not kept and no event is ever sent.
func init() { newWrites = false }
