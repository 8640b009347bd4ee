package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TRUSTED_PROXIES is empty by default (trust no one), takes CIDR ranges and
// bare addresses, and refuses anything else at start-up, naming the value.
func TestTrustedProxiesSetting(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "proxy.internal", "10.0.0.1:8080", "fe80::1%eth0", "10.0.0.0/8;192.0.2.7", "*"} {
		_, err := Load(func(k string) string { return map[string]string{"TRUSTED_PROXIES": bad}[k] })
		if err == nil || !strings.Contains(err.Error(), "TRUSTED_PROXIES") || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "\n") {
			t.Errorf("TRUSTED_PROXIES=%q: %v; want one line naming the setting and the value", bad, err)
		}
	}
	for setting, want := range map[string][]string{
		"":                               nil,
		" , ":                            nil,
		"10.0.0.0/8, 192.0.2.7,fd00::/8": {"10.0.0.0/8", "192.0.2.7/32", "fd00::/8"},
		"10.1.2.3/8":                     {"10.0.0.0/8"},
		"::ffff:192.0.2.7":               {"192.0.2.7/32"},
	} {
		cfg, err := Load(func(k string) string { return map[string]string{"TRUSTED_PROXIES": setting}[k] })
		var got []string
		for _, p := range cfg.TrustedProxies {
			got = append(got, p.String())
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("TRUSTED_PROXIES=%q: %v, %v; want %v", setting, got, err, want)
		}
	}
	if p, err := parseProxy("2001:db8::1"); err != nil || p != netip.MustParsePrefix("2001:db8::1/128") {
		t.Errorf("a bare IPv6 address: %v, %v; want a range of one", p, err)
	}
}
