// Package allowlist parses and matches a list of allowed hosts: names (hooks.example.com),
// wildcards (*.example.com: its subdomains), addresses (203.0.113.7) and ranges
// (10.20.0.0/16). The configuration checks webhooks.allowed_hosts with it at start-up, and the
// webhook policy matches destinations against it, so both read the list the same way.
package allowlist

import (
	"fmt"
	"net/netip"
	"strings"
)

// List is a parsed list of allowed hosts. The zero value allows nothing.
type List struct {
	names    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
	prefixes []netip.Prefix
}

// Parse reads the entries; blank entries are skipped. An error names the entry that is not a
// host name, *.domain, address or range.
func Parse(entries []string) (*List, error) {
	l := &List{names: map[string]bool{}}
	for _, raw := range entries {
		h := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(raw), "."))
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		switch {
		case h == "":
			continue
		case strings.Contains(h, "/"):
			pre, err := netip.ParsePrefix(h)
			if err != nil {
				return nil, fmt.Errorf("%q is not a valid address range", raw)
			}
			l.prefixes = append(l.prefixes, pre.Masked())
		case strings.HasPrefix(h, "*."):
			l.suffixes = append(l.suffixes, h[1:])
		default:
			if ip, err := netip.ParseAddr(h); err == nil {
				ip = ip.Unmap()
				l.prefixes = append(l.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			if strings.ContainsAny(h, "*:/ ") {
				return nil, fmt.Errorf("%q is not a host name, *.domain, address or range", raw)
			}
			l.names[h] = true
		}
	}
	return l, nil
}

// HasAddr reports whether an address or range entry covers ip.
func (l *List) HasAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, pre := range l.prefixes {
		if pre.Contains(ip) {
			return true
		}
	}
	return false
}

// HasName reports whether a name or wildcard entry covers host (lower-case, no trailing dot).
func (l *List) HasName(host string) bool {
	if l.names[host] {
		return true
	}
	for _, s := range l.suffixes {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	return false
}

// Empty reports whether nothing is allowed.
func (l *List) Empty() bool {
	return len(l.names) == 0 && len(l.suffixes) == 0 && len(l.prefixes) == 0
}
