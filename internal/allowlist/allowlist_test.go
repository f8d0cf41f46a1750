package allowlist

import (
	"net/netip"
	"testing"
)

func TestParseAndMatch(t *testing.T) {
	t.Parallel()
	l, err := Parse([]string{" Hooks.Example.com. ", "*.partner.test", "[::1]", "10.20.0.0/16", ""})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host string
		want bool
	}{{"hooks.example.com", true}, {"a.partner.test", true}, {"partner.test", false}, {"example.com", false}} {
		if got := l.HasName(c.host); got != c.want {
			t.Errorf("HasName(%s) = %v, want %v", c.host, got, c.want)
		}
	}
	for _, c := range []struct {
		addr string
		want bool
	}{{"::1", true}, {"10.20.3.4", true}, {"::ffff:10.20.3.4", true}, {"10.21.0.1", false}} {
		if got := l.HasAddr(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("HasAddr(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
	if l.Empty() {
		t.Error("a list with entries reports empty")
	}
	if empty, _ := Parse(nil); !empty.Empty() || empty.HasName("localhost") {
		t.Error("an empty list allows something")
	}
}

func TestParseNamesTheBadEntry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		entry, want string
	}{
		{"10.0.0.0/33", `"10.0.0.0/33" is not a valid address range`},
		{"hooks.*.example.com", `"hooks.*.example.com" is not a host name, *.domain, address or range`},
	} {
		if _, err := Parse([]string{c.entry}); err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) = %v, want %q", c.entry, err, c.want)
		}
	}
}
