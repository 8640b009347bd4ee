package main

import (
	"fmt"
	"net/netip"
	"strings"
)

// loadNetwork reads TRUSTED_PROXIES: the reverse proxies (load balancers)
// whose X-Forwarded-For names the client. Empty, the default, trusts no
// one: the client is the connection's peer, whatever it sends.
func (cfg *config) loadNetwork(getenv func(string) string) []error {
	var errs []error
	for _, item := range strings.Split(getenv("TRUSTED_PROXIES"), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		proxy, err := parseProxy(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("TRUSTED_PROXIES: %q is not an IP address or CIDR range (such as 10.0.0.0/8, 192.0.2.7 or fd00::/8); list the proxies' addresses, separated by commas, or leave it empty to trust none", item))
			continue
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, proxy)
	}
	return errs
}

// parseProxy reads a CIDR range, or a bare address as a range of one.
// Zones (fe80::1%eth0) are refused: a forwarded address never has one.
func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if addr.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("an address with a zone: %s", s)
	}
	addr = addr.Unmap()
	return netip.PrefixFrom(addr, addr.BitLen()), nil
}
