package main

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// loadCORS reads CORS_ORIGINS, the origins whose pages may call the API
// from a browser: comma-separated, none by default. Each is checked as the
// browser writes its Origin header, since any other spelling would never
// match one.
func (cfg *config) loadCORS(getenv func(string) string) []error {
	var errs []error
	for origin := range strings.SplitSeq(getenv("CORS_ORIGINS"), ",") {
		origin = strings.TrimSpace(origin)
		switch want, ok := canonicalOrigin(origin); {
		case origin == "" || slices.Contains(cfg.CORSOrigins, origin):
		case origin == "*":
			errs = append(errs, fmt.Errorf(`CORS_ORIGINS: "*" is not accepted: name each origin whose pages may call the API, such as https://app.example.com`))
		case !ok:
			errs = append(errs, fmt.Errorf("CORS_ORIGINS: %q is not an origin: want scheme://host[:port], http or https, such as https://app.example.com", origin))
		case origin != want:
			errs = append(errs, fmt.Errorf("CORS_ORIGINS: %q is not written as a browser sends it (lower case, no path, no default port): want %q", origin, want))
		default:
			cfg.CORSOrigins = append(cfg.CORSOrigins, origin)
		}
	}
	return errs
}

// canonicalOrigin is origin as a browser's Origin header has it: the
// scheme, host and port of an http or https URL, in lower case, without
// the scheme's default port; ok is false for anything without a host.
func canonicalOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return "", false
	}
	host, port := u.Hostname(), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // an IPv6 address
	}
	switch n, err := strconv.Atoi(port); {
	case port == "" || (u.Scheme == "http" && n == 80) || (u.Scheme == "https" && n == 443):
	case err != nil || n < 1 || n > 65535:
		return "", false
	default:
		host += ":" + strconv.Itoa(n)
	}
	return strings.ToLower(u.Scheme + "://" + host), true
}
