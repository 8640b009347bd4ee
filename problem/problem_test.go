package problem

import "testing"

// Every detail reads as a sentence, whatever wrote it: a Go error in lower
// case gets its capital and full stop, a sentence is left as it is.
func TestDetailIsASentence(t *testing.T) {
	for in, want := range map[string]string{
		"the idempotency key is empty":   "The idempotency key is empty.",
		"Your card was declined.":        "Your card was declined.",
		" http: request body too large ": "Http: request body too large.",
		"":                               "",
		"é accents stay whole":           "É accents stay whole.",
	} {
		if got := NotFound.With(in).Detail; got != want {
			t.Errorf("%q: detail %q, want %q", in, got, want)
		}
	}
}
