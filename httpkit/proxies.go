package httpkit

import (
	"net/netip"

	"github.com/gin-gonic/gin"
)

// TrustProxies makes c.ClientIP() the connection's peer or, when the peer
// is one of proxies, the rightmost address in X-Forwarded-For that is not
// (left of it, the client writes what it likes). With no proxies no
// forwarded header is read; X-Real-IP never is, since a proxy that does
// not set it passes on the client's.
func TrustProxies(r *gin.Engine, proxies []netip.Prefix) {
	r.ForwardedByClientIP = true
	r.RemoteIPHeaders = []string{"X-Forwarded-For"}
	var cidrs []string
	for _, p := range proxies {
		cidrs = append(cidrs, p.String())
	}
	if err := r.SetTrustedProxies(cidrs); err != nil {
		panic(err) // a netip.Prefix always reads as a CIDR
	}
}
