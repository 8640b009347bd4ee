package httpkit

import (
	"net/netip"

	"github.com/gin-gonic/gin"
)

// TrustProxies makes c.ClientIP() the client's address. It is the
// connection's peer, unless the peer is one of proxies: then it is the
// rightmost address in X-Forwarded-For that is not one of them, the one
// the outermost trusted proxy saw (everything left of it is the client's
// to write). With no proxies every forwarded header is ignored: gin's own
// default trusts every peer.
//
// X-Real-IP is not read: a proxy that does not set it passes on the
// client's, and one tried after X-Forwarded-For would let a client choose
// its address whenever X-Forwarded-For does not parse.
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
