package auth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/taskcenter/taskcenter/internal/config"
)

// Gateway is the trusted gateway mode: a proxy in front of taskcenter authenticates users and
// names them in a header. The header is believed only on connections from the configured
// proxy addresses; from anywhere else it is ignored, so a client cannot name itself.
type Gateway struct {
	userHeader, roleHeader string
	adminValues            []string
	proxies                []netip.Prefix
	names                  names // the header's value → the owner
}

// NewGateway returns the gateway mode, or nil when userHeader is empty (off). proxies are
// addresses or ranges.
func NewGateway(userHeader, roleHeader string, adminValues, proxies []string) (*Gateway, error) {
	prefixes, err := ParsePrefixes(proxies)
	if err != nil {
		return nil, err
	}
	if userHeader == "" {
		return &Gateway{proxies: prefixes}, nil // no identity, but the proxies still give client addresses
	}
	return &Gateway{userHeader: userHeader, roleHeader: roleHeader, adminValues: adminValues, proxies: prefixes,
		names: names{prefix: config.TrustedHeader{}.OwnerPrefix()}}, nil
}

// WithSubjects names the gateway users listed in m (header value → owner) by the bare owner
// names given instead of gateway:<header value> (auth.trusted_header.map_subjects).
func (g *Gateway) WithSubjects(m map[string]string) *Gateway {
	if g != nil {
		g.names.mapped = m
	}
	return g
}

// Gives reports whether owner is a name the gateway gives its users now (false when off).
func (g *Gateway) Gives(owner string) bool { return g.Enabled() && g.names.gives(owner) }

// ParsePrefixes reads addresses and ranges ("10.0.0.5", "10.0.0.0/24").
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range list {
		if pre, err := netip.ParsePrefix(p); err == nil {
			out = append(out, pre.Masked())
			continue
		}
		a, err := netip.ParseAddr(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or a range", p)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// Enabled reports whether the gateway names users.
func (g *Gateway) Enabled() bool { return g != nil && g.userHeader != "" }

// HeaderName is the header the gateway names the user in ("" when off).
func (g *Gateway) HeaderName() string {
	if g == nil {
		return ""
	}
	return g.userHeader
}

// fromProxy reports whether the request's connection comes from a configured proxy.
func (g *Gateway) fromProxy(r *http.Request) bool {
	if g == nil {
		return false
	}
	a, ok := peer(r)
	return ok && g.isProxy(a)
}

func (g *Gateway) isProxy(a netip.Addr) bool {
	return slices.ContainsFunc(g.proxies, func(p netip.Prefix) bool { return p.Contains(a) })
}

// Identify returns the user the gateway names (gateway:<header value>, unless mapped), when
// the request comes from the gateway and carries the header.
func (g *Gateway) Identify(r *http.Request) (Identity, bool) {
	if !g.Enabled() || !g.fromProxy(r) {
		return Identity{}, false
	}
	user := strings.TrimSpace(r.Header.Get(g.userHeader))
	if !validUser(user) {
		return Identity{}, false
	}
	id := Identity{User: g.names.owner(user), Subject: user}
	if g.roleHeader != "" {
		for v := range strings.SplitSeq(r.Header.Get(g.roleHeader), ",") {
			if slices.Contains(g.adminValues, strings.TrimSpace(v)) {
				id.Admin = true
			}
		}
	}
	return id, true
}

// ClientAddr is the address a request comes from, for the audit trail: the peer's, or, when
// the peer is a configured proxy, the right-most X-Forwarded-For address that is not one (the
// client as the first trusted proxy saw it; entries further left are the client's own claim).
func (g *Gateway) ClientAddr(r *http.Request) string {
	a, ok := peer(r)
	if !ok {
		return r.RemoteAddr
	}
	if g == nil || !g.isProxy(a) {
		return a.String()
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		h = h.Unmap()
		if !g.isProxy(h) {
			return h.String()
		}
	}
	return a.String()
}

func peer(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}
