package main

import (
	"fmt"
	"time"
)

// sessionConfig is how long a browser session lasts: SessionIdle without a
// request, SessionMaxAge at most however busy (handlers.Deps.SessionIdle,
// SessionMaxAge).
type sessionConfig struct {
	SessionIdle, SessionMaxAge time.Duration
}

// loadSessions reads SESSION_IDLE_TIMEOUT and SESSION_MAX_AGE; the idle
// timeout may not outlast the absolute one, which would make it mean
// nothing.
func (cfg *sessionConfig) loadSessions(getenv func(string) string) []error {
	var errs []error
	for _, d := range []struct {
		name, fallback string
		dst            *time.Duration
	}{
		{"SESSION_IDLE_TIMEOUT", "24h", &cfg.SessionIdle},
		{"SESSION_MAX_AGE", "336h", &cfg.SessionMaxAge},
	} {
		v, err := time.ParseDuration(withDefault(getenv(d.name), d.fallback))
		if err != nil || v <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as %s", d.name, getenv(d.name), d.fallback))
		}
		*d.dst = v
	}
	if len(errs) == 0 && cfg.SessionIdle > cfg.SessionMaxAge {
		errs = append(errs, fmt.Errorf("SESSION_IDLE_TIMEOUT (%s) must be at most SESSION_MAX_AGE (%s)", cfg.SessionIdle, cfg.SessionMaxAge))
	}
	return errs
}
