package middleware

import (
	"errors"
	"strings"
	"testing"
)

func TestParseKeyHeader(t *testing.T) {
	long := strings.Repeat("k", maxKeyLength)
	tooLong := long + "k"
	tests := []struct {
		name    string
		values  []string
		want    string
		wantErr error
	}{
		{"sf-string", []string{`"abc"`}, "abc", nil},
		{"bare", []string{`abc`}, "abc", nil},
		{"uuid", []string{`8e03978e-40d5-43e8-bc93-6894a57f9324`}, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"OWS around sf-string", []string{" \t\"abc\"\t "}, "abc", nil},
		{"OWS around bare", []string{" \tabc\t "}, "abc", nil},
		{"escaped quote", []string{`"a\"b"`}, `a"b`, nil},
		{"escaped backslash", []string{`"a\\b"`}, `a\b`, nil},
		{"space inside sf-string", []string{`"a b"`}, "a b", nil},
		{"comma inside sf-string", []string{`"a,b"`}, "a,b", nil},
		{"bare with backslash and semicolon", []string{`a\b;c`}, `a\b;c`, nil},
		{"255 bare", []string{long}, long, nil},
		{"255 sf-string", []string{`"` + long + `"`}, long, nil},
		{"256 bare", []string{tooLong}, "", errKeyLong},
		{"256 sf-string", []string{`"` + tooLong + `"`}, "", errKeyLong},
		{"no header", nil, "", errKeyMissing},
		{"empty header", []string{""}, "", errKeyEmpty},
		{"blank header", []string{" \t "}, "", errKeyEmpty},
		{"empty sf-string", []string{`""`}, "", errKeyEmpty},
		{"two header values", []string{"a", "b"}, "", errKeyList},
		{"two equal header values", []string{`"a"`, `"a"`}, "", errKeyList},
		{"sf parameters", []string{`"k";p=1`}, "", errKeySF},
		{"sf boolean parameter", []string{`"k";p`}, "", errKeySF},
		{"sf list", []string{`"a", "b"`}, "", errKeySF},
		{"sf-string with trailing junk", []string{`"abc"x`}, "", errKeySF},
		{"sf-string then token", []string{`"abc" def`}, "", errKeySF},
		{"unterminated sf-string", []string{`"abc`}, "", errKeySF},
		{"bad escape", []string{`"a\x"`}, "", errKeySF},
		{"non-ASCII sf-string", []string{`"café"`}, "", errKeySF},
		{"control in sf-string", []string{"\"a\x01b\""}, "", errKeySF},
		{"bare with space", []string{"a b"}, "", errKeyBare},
		{"bare with comma", []string{"a,b"}, "", errKeyBare},
		{"bare list", []string{"a, b"}, "", errKeyBare},
		{"bare with quote", []string{`a"b`}, "", errKeyBare},
		{"token with trailing sf-string", []string{`abc"def"`}, "", errKeyBare},
		{"non-ASCII bare", []string{"café"}, "", errKeyBare},
		{"DEL bare", []string{"a\x7fb"}, "", errKeyBare},
		{"control bare", []string{"a\x00b"}, "", errKeyBare},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKeyHeader(tt.values)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("parseKeyHeader(%q) error = %v, want %v", tt.values, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("parseKeyHeader(%q) = %q, want %q", tt.values, got, tt.want)
			}
		})
	}
}

func TestCheckKey(t *testing.T) {
	long := strings.Repeat("k", maxKeyLength)
	tests := []struct {
		name    string
		key     string
		wantErr error
	}{
		{"uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"255", long, nil},
		{"printable ASCII with space, quote and comma", `a b"c,d\e`, nil},
		{"one character", "k", nil},
		{"empty", "", errKeyEmpty},
		{"256", long + "k", errKeyLong},
		{"non-ASCII", "café", errKeyChars},
		{"tab", "a\tb", errKeyChars},
		{"newline", "a\nb", errKeyChars},
		{"DEL", "a\x7f", errKeyChars},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkKey(tt.key)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("checkKey(%q) error = %v, want %v", tt.key, err, tt.wantErr)
			}
			if tt.wantErr == nil && got != tt.key {
				t.Fatalf("checkKey(%q) = %q, want it unchanged", tt.key, got)
			}
		})
	}
}

// sfString serialises key as an RFC 8941 sf-string.
func sfString(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

// FuzzParseKeyHeader: whatever the header holds, the parser accepts only
// keys every layer can store, and the bare and quoted forms of a key name
// the same key. The seed corpus is in testdata/fuzz/FuzzParseKeyHeader.
func FuzzParseKeyHeader(f *testing.F) {
	for _, seed := range []string{
		`abc`, `"abc"`, ` "abc" `, `"a\"b"`, `"a\\b"`, `"a b"`, `""`, ``, `"k";p=1`, `"a", "b"`,
		`a b`, `a,b`, `a"b`, `"abc"x`, `"abc`, `"a\x"`, "café", `"café"`, "a\x7f", `?1`, `:YWJj:`,
		`8e03978e-40d5-43e8-bc93-6894a57f9324`, strings.Repeat("k", maxKeyLength), strings.Repeat("k", maxKeyLength+1),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		key, err := parseKeyHeader([]string{value})
		// Surrounding spaces and tabs never matter.
		if padded, paddedErr := parseKeyHeader([]string{" \t" + value + "\t "}); padded != key || (paddedErr == nil) != (err == nil) {
			t.Fatalf("parseKeyHeader(%q) = %q, %v, but padded it gives %q, %v", value, key, err, padded, paddedErr)
		}
		if err != nil {
			if key != "" {
				t.Fatalf("parseKeyHeader(%q) = %q with error %v; want no key with an error", value, key, err)
			}
			return
		}
		if len(key) < 1 || len(key) > maxKeyLength {
			t.Fatalf("parseKeyHeader(%q) accepted a key of %d bytes", value, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < ' ' || key[i] > '~' {
				t.Fatalf("parseKeyHeader(%q) accepted a key with byte %#x", value, key[i])
			}
		}
		// Every accepted key, bare or quoted, names the same key once written
		// as an sf-string: "abc" and abc are one key.
		quoted := sfString(key)
		again, err := parseKeyHeader([]string{quoted})
		if err != nil || again != key {
			t.Fatalf("parseKeyHeader(%q) = %q, but its sf-string %q parses to %q, %v", value, key, quoted, again, err)
		}
		// And so does its bare form, when it has one.
		if !strings.ContainsAny(key, ` ",`) {
			if bare, err := parseKeyHeader([]string{key}); err != nil || bare != key {
				t.Fatalf("parseKeyHeader(%q) = %q, but its bare form parses to %q, %v", value, key, bare, err)
			}
		}
	})
}
