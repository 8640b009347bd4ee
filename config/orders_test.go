package config

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
		cfg, err := Load(func(name string) string {
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

func TestGroupCommitSetting(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		err   bool
	}{
		{"", 32, false}, {"1", 1, false}, {"1000", 1000, false},
		{"0", 0, true}, {"1001", 0, true}, {"many", 0, true}, {"-3", 0, true},
	} {
		cfg, err := Load(func(name string) string {
			if name == "SQLITE_GROUP_COMMIT" {
				return tc.value
			}
			return ""
		})
		switch {
		case tc.err && (err == nil || !strings.Contains(err.Error(), "SQLITE_GROUP_COMMIT")):
			t.Errorf("SQLITE_GROUP_COMMIT=%q: error %v, want one naming it", tc.value, err)
		case !tc.err && (err != nil || cfg.GroupCommit != tc.want):
			t.Errorf("SQLITE_GROUP_COMMIT=%q: %d, %v; want %d", tc.value, cfg.GroupCommit, err, tc.want)
		}
	}
}
