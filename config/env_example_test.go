package config

import (
	"os"
	"regexp"
	"testing"
)

// .env.example lists every setting of the table, each with its default or
// empty, and nothing the table does not have, but for OpenTelemetry's own
// variables, which the SDK reads: those internal/tracing reads must be
// there too. Every setting has its one-line doc.
func TestEnvExampleIsTheTable(t *testing.T) {
	text, err := os.ReadFile("../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	// A commented line is an example value, not a default.
	listed, example := map[string]string{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(# )?([A-Z][A-Z0-9_]*)=(.*)$`).FindAllStringSubmatch(string(text), -1) {
		listed[m[2]], example[m[2]] = m[3], m[1] != ""
	}
	table := map[string]bool{}
	for _, s := range Settings() {
		table[s.Name] = true
		value, ok := listed[s.Name]
		switch {
		case !ok:
			t.Errorf(".env.example does not list %s", s.Name)
		case value != "" && value != s.Default && !example[s.Name]:
			t.Errorf(".env.example: %s=%s, want %q (the default) or empty", s.Name, value, s.Default)
		}
		if s.Doc == "" {
			t.Errorf("%s has no doc", s.Name)
		}
	}
	otel := regexp.MustCompile(`^OTEL_`)
	for name := range listed {
		if !table[name] && !otel.MatchString(name) {
			t.Errorf(".env.example lists %s, which no setting reads", name)
		}
	}
	tracing, err := os.ReadFile("../internal/tracing/tracing.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`getenv\("([A-Z_]+)"\)`).FindAllStringSubmatch(string(tracing), -1) {
		if _, ok := listed[m[1]]; !ok {
			t.Errorf("internal/tracing reads %s, which .env.example does not list", m[1])
		}
	}
}
