package httpface

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
)

// Headers that carry a tenant's API key with a tenants file.
const (
	HeaderAPIKey        = "X-API-Key"
	HeaderAuthorization = "Authorization"
)

// apiKeyHeader is HeaderAPIKey in canonical form, so that looking it up
// does not canonicalize (and allocate) on every request.
var apiKeyHeader = http.CanonicalHeaderKey(HeaderAPIKey)

// Describer reads what an HTTP request presents to the engine: the
// credentials that name its tenant and its client address. The zero
// value reads X-Tenant-ID and trusts no proxy.
type Describer struct {
	// TenantHeader carries the tenant without a tenants file
	// (TOLLGATE_TENANT_HEADER). Empty means X-Tenant-ID.
	TenantHeader string
	// Trusted are the proxies whose X-Forwarded-For and Forwarded are
	// believed (TOLLGATE_TRUSTED_PROXIES).
	Trusted domain.TrustedProxies
}

// Describe returns r as the engine's described request, with method and
// path (its normal form) as the face read them: from the request line on
// the proxy, from the forwarded headers on the check listener.
func (d Describer) Describe(r *http.Request, method, path string) engine.Described {
	header := d.TenantHeader
	if header == "" {
		header = HeaderTenantID
	}
	return engine.Described{
		Credentials: engine.Credentials{
			Header: r.Header.Get(header),
			APIKey: r.Header.Get(apiKeyHeader),
			Bearer: BearerToken(r.Header),
		},
		Method: method,
		Path:   path,
		Client: d.ClientAddr(r),
	}
}

// ClientAddr returns r's client address (docs/edge.md): its TCP peer,
// or, when the peer is a trusted proxy, the address its X-Forwarded-For
// (else Forwarded) names. The zero value when the peer is not an IP
// address (a Unix socket, a test).
func (d Describer) ClientAddr(r *http.Request) netip.Addr {
	peer := PeerAddr(r)
	if !d.Trusted.Contains(peer) {
		return peer
	}
	return d.Trusted.ClientAddr(peer, r.Header["X-Forwarded-For"], r.Header["Forwarded"])
}

// PeerAddr returns the address of r's TCP peer, unmapped, or the zero
// value.
func PeerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

// BearerToken returns the token of h's (first) Authorization header when
// its scheme is Bearer (in any case), else "".
func BearerToken(h http.Header) string { return BearerTokenOf(h.Get(HeaderAuthorization)) }

// BearerTokenOf returns the token of v, an Authorization value, when its
// scheme is Bearer (in any case), else "". The scheme ends at the first
// space or tab.
func BearerTokenOf(v string) string {
	i := strings.IndexAny(v, " \t")
	if i < 0 || !strings.EqualFold(v[:i], "Bearer") {
		return ""
	}
	return strings.TrimSpace(v[i+1:])
}
