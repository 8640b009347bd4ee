package handlers

import (
	"strconv"
	"testing"
	"time"
)

// Whatever a client sends as a cursor, parseCursor either refuses it or
// returns a cursor in range — a positive time, an id the listing could
// have made, one a signed 64-bit column holds — that reads back the same
// from the string the listing would send. Run by .ci/run with -fuzz.
func FuzzParseCursor(f *testing.F) {
	for _, seed := range []string{
		cursor{at: time.Unix(0, 1).UTC(), id: "1"}.String(),
		cursor{at: time.Unix(0, 1764547200000000000).UTC(), id: "00000000-0000-4000-8000-000000000000"}.String(),
		"MS4xODQ0Njc0NDA3MzcwOTU1MTYxNQ", // 1.18446744073709551615
		"", "!!", "bm90LWEtY3Vyc29y", "LTUuMQ", "MS4wMDc",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, valid := range map[string]func(string) bool{"orders": isUUID, "keys": isKeyID} {
			c, ok := parseCursor(s, valid)
			if !ok {
				continue
			}
			if c.at.UnixNano() <= 0 || !valid(c.id) {
				t.Fatalf("%s: %q read as %v, out of range", name, s, c)
			}
			if name == "keys" {
				if n, err := strconv.ParseInt(c.id, 10, 64); err != nil || n <= 0 {
					t.Fatalf("%q: key id %q does not fit the database", s, c.id)
				}
			}
			again, ok := parseCursor(c.String(), valid)
			if !ok || *again != *c || c.String() != s {
				t.Fatalf("%s: %q read as %v, written back as %q", name, s, c, c.String())
			}
		}
	})
}
