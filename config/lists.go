package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Prefixes are TRUSTED_PROXIES: CIDR ranges and bare addresses,
// comma-separated; empty items are skipped.
type Prefixes []netip.Prefix

// UnmarshalText reads the list, naming each item that is not one.
func (ps *Prefixes) UnmarshalText(text []byte) error {
	var errs []error
	for item := range strings.SplitSeq(string(text), ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		proxy, err := parseProxy(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q is not an IP address or CIDR range (such as 10.0.0.0/8, 192.0.2.7 or fd00::/8); list the proxies' addresses, separated by commas, or leave it empty to trust none", item))
			continue
		}
		*ps = append(*ps, proxy)
	}
	return errors.Join(errs...)
}

// parseProxy reads a CIDR range, or a bare address as a range of one.
// Zones (fe80::1%eth0) are refused: a forwarded address never has one.
func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	addr, err := netip.ParseAddr(s)
	if err == nil && addr.Zone() != "" {
		err = fmt.Errorf("an address with a zone: %s", s)
	}
	addr = addr.Unmap()
	return netip.PrefixFrom(addr, addr.BitLen()), err
}

// Origins are CORS_ORIGINS: comma-separated, each checked as the browser
// writes its Origin header, since any other spelling would never match one.
type Origins []string

// UnmarshalText reads the list, skipping empty items and repeats, and says
// how to write each origin a browser would not send as it is written.
func (os *Origins) UnmarshalText(text []byte) error {
	var errs []error
	for origin := range strings.SplitSeq(string(text), ",") {
		origin = strings.TrimSpace(origin)
		switch want, ok := canonicalOrigin(origin); {
		case origin == "" || slices.Contains(*os, origin):
		case origin == "*":
			errs = append(errs, errors.New(`"*" is not accepted: name each origin whose pages may call the API, such as https://app.example.com`))
		case !ok:
			errs = append(errs, fmt.Errorf("%q is not an origin: want scheme://host[:port], http or https, such as https://app.example.com", origin))
		case origin != want:
			errs = append(errs, fmt.Errorf("%q is not written as a browser sends it (lower case, no path, no default port): want %q", origin, want))
		default:
			*os = append(*os, origin)
		}
	}
	return errors.Join(errs...)
}

// canonicalOrigin is origin as a browser's Origin header has it: the
// scheme, host and port of an http or https URL, in lower case, without
// the scheme's default port; ok is false for anything without a host.
func canonicalOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || !httpURL(origin) || u.Hostname() == "" {
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
