package main

import (
	"strings"
	"testing"
	"time"
)

func TestOrderExpirySetting(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
		err   string
	}{
		{"", 30 * time.Minute, ""},
		{"2h", 2 * time.Hour, ""},
		{"0", 0, "ORDER_EXPIRY"},
		{"-5m", 0, "ORDER_EXPIRY"},
		{"soon", 0, "ORDER_EXPIRY"},
	} {
		cfg, err := loadConfig(func(name string) string {
			if name == "ORDER_EXPIRY" {
				return tc.value
			}
			return ""
		})
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ORDER_EXPIRY=%q: error %v, want one naming %s", tc.value, err, tc.err)
		case tc.err == "" && (err != nil || cfg.OrderExpiry != tc.want):
			t.Errorf("ORDER_EXPIRY=%q: %s, %v; want %s", tc.value, cfg.OrderExpiry, err, tc.want)
		}
	}
}
