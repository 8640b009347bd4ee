package config

import (
	"strings"
	"testing"
	"time"
)

func TestSessionSettings(t *testing.T) {
	cfg, err := Load(func(string) string { return "" })
	if err != nil || cfg.SessionIdle != 24*time.Hour || cfg.SessionMaxAge != 14*24*time.Hour {
		t.Fatalf("defaults: idle %s, max age %s (%v); want 24h and 14 days", cfg.SessionIdle, cfg.SessionMaxAge, err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SESSION_IDLE_TIMEOUT": "a day"}, `SESSION_IDLE_TIMEOUT="a day": want a positive duration`},
		{map[string]string{"SESSION_IDLE_TIMEOUT": "0s"}, `SESSION_IDLE_TIMEOUT="0s": want a positive duration`},
		{map[string]string{"SESSION_MAX_AGE": "-1h"}, `SESSION_MAX_AGE="-1h": want a positive duration`},
		{map[string]string{"SESSION_IDLE_TIMEOUT": "48h", "SESSION_MAX_AGE": "24h"}, "SESSION_IDLE_TIMEOUT (48h0m0s) must be at most SESSION_MAX_AGE (24h0m0s)"},
	} {
		_, err := Load(func(name string) string { return c.env[name] })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.env, err, c.want)
		}
	}
	cfg, err = Load(func(name string) string {
		return map[string]string{"SESSION_IDLE_TIMEOUT": "30m", "SESSION_MAX_AGE": "8h"}[name]
	})
	if err != nil || cfg.SessionIdle != 30*time.Minute || cfg.SessionMaxAge != 8*time.Hour {
		t.Fatalf("set: idle %s, max age %s (%v); want 30m and 8h", cfg.SessionIdle, cfg.SessionMaxAge, err)
	}
}
