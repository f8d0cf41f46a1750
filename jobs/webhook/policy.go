package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taskcenter/taskcenter/internal/allowlist"
	"github.com/taskcenter/taskcenter/internal/msg"
)

// Policy decides where webhooks may be sent (SSRF protection). A URL's host must be listed in
// webhooks.allowed_hosts — by name (hooks.example.com), by wildcard (*.example.com: its
// subdomains), by address (203.0.113.7) or by range (10.20.0.0/16); an empty list allows
// nothing. An address that is loopback, private, link-local, CGNAT, unspecified or multicast
// is refused unless an address or range entry covers it: a host name entry never lets a
// webhook reach the internal network, whatever the name resolves to. The address check runs
// at subscription time on what the name resolves to, and again at dial time on the address
// actually connected to, so a name that resolves elsewhere later (DNS rebinding) gains
// nothing.
type Policy struct {
	allowed   *allowlist.List
	resolver  *net.Resolver
	lookupFor time.Duration
}

// ErrNotAllowed is wrapped by every refusal of a URL or address.
var ErrNotAllowed = errors.New("webhook destination not allowed")

// NotAllowedError says why a URL is refused, as a message for the user.
type NotAllowedError struct{ Reason msg.Message }

func (e *NotAllowedError) Error() string { return e.Reason.English() }

// Unwrap makes errors.Is(err, ErrNotAllowed) hold.
func (e *NotAllowedError) Unwrap() error { return ErrNotAllowed }

func notAllowed(code string, nameValues ...string) error {
	return &NotAllowedError{Reason: msg.New(code, nameValues...)}
}

// NewPolicy parses the allowed hosts.
func NewPolicy(allowedHosts []string) (*Policy, error) {
	allowed, err := allowlist.Parse(allowedHosts)
	if err != nil {
		return nil, fmt.Errorf("webhooks.allowed_hosts: %w", err)
	}
	return &Policy{allowed: allowed, resolver: net.DefaultResolver, lookupFor: 3 * time.Second}, nil
}

// internal ranges that need an explicit address or range entry.
var internalRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64 can reach IPv4 internals
}

// internal reports whether ip is an address of this machine or the internal network.
func internal(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() ||
		ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range internalRanges {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Empty reports whether nothing is allowed.
func (p *Policy) Empty() bool { return p.allowed.Empty() }

// MaxURLLength caps a webhook URL.
const MaxURLLength = 2048

// parse checks a URL's form and returns its lower-cased host.
func parse(raw string) (*url.URL, string, error) {
	if len(raw) > MaxURLLength {
		return nil, "", notAllowed("field_error.url_too_long", "max", strconv.Itoa(MaxURLLength))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, "", notAllowed("field_error.url_not_absolute", "http", "http://", "https", "https://")
	}
	if u.User != nil {
		return nil, "", notAllowed("field_error.url_user")
	}
	if u.Fragment != "" {
		return nil, "", notAllowed("field_error.url_fragment")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return nil, "", notAllowed("field_error.url_no_host")
	}
	return u, host, nil
}

// checkHost is the check before every send: the host must be listed (no name resolution; the
// dialer checks the address it connects to).
func (p *Policy) checkHost(raw string) (*url.URL, error) {
	u, host, err := parse(raw)
	if err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !p.allowed.HasAddr(ip) {
			return nil, notAllowed("field_error.url_host_not_allowed", "host", host, "setting", "webhooks.allowed_hosts")
		}
		return u, nil
	}
	if !p.allowed.HasName(host) {
		return nil, notAllowed("field_error.url_host_not_allowed", "host", host, "setting", "webhooks.allowed_hosts")
	}
	return u, nil
}

// CheckURL is the check at subscription time: the URL's form, its host against the allowed
// list, and every address the host resolves to now.
func (p *Policy) CheckURL(ctx context.Context, raw string) error {
	u, err := p.checkHost(raw)
	if err != nil {
		return err
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.checkAddr(ip)
	}
	ctx, cancel := context.WithTimeout(ctx, p.lookupFor)
	defer cancel()
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return notAllowed("field_error.url_no_address", "host", host)
	}
	for _, ip := range addrs {
		if err := p.checkAddr(ip); err != nil {
			return err
		}
	}
	return nil
}

// checkAddr refuses internal addresses no address or range entry covers.
func (p *Policy) checkAddr(ip netip.Addr) error {
	if internal(ip) && !p.allowed.HasAddr(ip) {
		return notAllowed("field_error.url_private", "address", ip.Unmap().String(), "setting", "webhooks.allowed_hosts")
	}
	return nil
}

// control runs on every connection the webhook client dials, with the address it is about to
// connect to: the check that DNS cannot get round.
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return notAllowed("field_error.url_unchecked", "address", strconv.Quote(address))
	}
	return p.checkAddr(ap.Addr())
}
