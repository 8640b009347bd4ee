package config

import (
	"slices"
	"strings"
	"testing"
)

// CORS_ORIGINS takes origins as browsers send them, and says how to write
// any other spelling, since it would never match.
func TestCORSOriginsSetting(t *testing.T) {
	accepted := []struct {
		value string
		want  []string
	}{
		{"", nil},
		{" , ", nil},
		{"https://app.example.com", []string{"https://app.example.com"}},
		{"https://app.example.com, http://127.0.0.1:5173,https://app.example.com,", []string{"https://app.example.com", "http://127.0.0.1:5173"}},
		{"http://[::1]:8081", []string{"http://[::1]:8081"}},
	}
	for _, tc := range accepted {
		cfg, err := Load(func(k string) string { return map[string]string{"CORS_ORIGINS": tc.value}[k] })
		if err != nil || !slices.Equal(cfg.CORSOrigins, tc.want) {
			t.Errorf("CORS_ORIGINS=%q: %q, %v; want %q", tc.value, cfg.CORSOrigins, err, tc.want)
		}
	}
	refused := []struct{ value, want string }{
		{"*", `"*" is not accepted`},
		{"app.example.com", `"app.example.com" is not an origin`},
		{"ftp://files.example.com", `"ftp://files.example.com" is not an origin`},
		{"https://", `"https://" is not an origin`},
		{"http://app.example.com:99999", `"http://app.example.com:99999" is not an origin`},
		{"https://app.example.com/", `want "https://app.example.com"`},
		{"https://app.example.com/shop?x=1", `want "https://app.example.com"`},
		{"HTTPS://App.Example.com", `want "https://app.example.com"`},
		{"https://app.example.com:443", `want "https://app.example.com"`},
		{"http://app.example.com:", `want "http://app.example.com"`},
		{"https://user@app.example.com", `want "https://app.example.com"`},
		{"https://ok.example.com, https://bad.example.com/", `want "https://bad.example.com"`},
	}
	for _, tc := range refused {
		_, err := Load(func(k string) string { return map[string]string{"CORS_ORIGINS": tc.value}[k] })
		if err == nil || !strings.Contains(err.Error(), "CORS_ORIGINS: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CORS_ORIGINS=%q: got %v, want an error saying %s", tc.value, err, tc.want)
		}
	}
}
