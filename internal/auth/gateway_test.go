package auth_test

import (
	"net/http/httptest"
	"testing"

	"github.com/taskcenter/taskcenter/internal/auth"
)

func TestGatewayHeadersAreBelievedOnlyFromTheProxies(t *testing.T) {
	t.Parallel()
	g, err := auth.NewGateway("X-Forwarded-User", "X-Forwarded-Groups", []string{"admin"}, []string{"10.0.0.0/24", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	g.WithSubjects(map[string]string{"carol": "carol"})
	for _, c := range []struct {
		name, remote, user, groups, xff string
		want                            string
		admin, ok                       bool
		client                          string
	}{
		{"from the gateway", "10.0.0.9:5000", "alice", "staff", "198.51.100.4", "gateway:alice", false, true, "198.51.100.4"},
		{"an admin from the gateway", "192.0.2.7:5000", "ops", "staff, admin", "", "gateway:ops", true, true, "192.0.2.7"},
		{"a mapped user", "10.0.0.9:5000", "carol", "", "", "carol", false, true, "10.0.0.9"},
		{"from anywhere else", "198.51.100.4:5000", "ops", "admin", "10.0.0.9", "", false, false, "198.51.100.4"},
		{"no user header", "10.0.0.9:5000", "", "admin", "", "", false, false, "10.0.0.9"},
		{"a spoofed hop left of the real client", "10.0.0.9:5000", "alice", "", "203.0.113.66, 198.51.100.4, 10.0.0.3", "gateway:alice", false, true, "198.51.100.4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/v1/tasks", nil)
			r.RemoteAddr = c.remote
			if c.user != "" {
				r.Header.Set("X-Forwarded-User", c.user)
			}
			r.Header.Set("X-Forwarded-Groups", c.groups)
			if c.xff != "" {
				r.Header.Set("X-Forwarded-For", c.xff)
			}
			id, ok := g.Identify(r)
			if ok != c.ok || id.User != c.want || id.Admin != c.admin {
				t.Fatalf("identified %+v %v, want %q admin=%v ok=%v", id, ok, c.want, c.admin, c.ok)
			}
			if got := g.ClientAddr(r); got != c.client {
				t.Fatalf("client address %s, want %s", got, c.client)
			}
		})
	}
	for owner, gives := range map[string]bool{"gateway:alice": true, "carol": true, "gateway:carol": false, "alice": false, "oidc:x:alice": false} {
		if got := g.Gives(owner); got != gives {
			t.Errorf("Gives(%q) = %v, want %v", owner, got, gives)
		}
	}
	if off, _ := auth.NewGateway("", "", nil, nil); off.Enabled() || off.Gives("gateway:alice") {
		t.Fatal("a gateway without a user header is on")
	}
}

func TestConfigTokensMayBeGivenAsTheirHash(t *testing.T) {
	t.Parallel()
	plain, ok1 := auth.ConfigTokenSum("demo-user-token-alice")
	hashed, ok2 := auth.ConfigTokenSum("sha256:" + auth.HashToken("demo-user-token-alice"))
	if !ok1 || !ok2 || plain != hashed {
		t.Fatal("a token and its sha256: form do not match")
	}
	if _, ok := auth.ConfigTokenSum("sha256:nothex"); ok {
		t.Fatal("a malformed hash is accepted")
	}
	tok, hash := auth.NewAPIToken()
	if len(tok) < 32 || auth.HashToken(tok) != hash || auth.TokenPrefix(tok) != tok[:9] {
		t.Fatalf("token %q hash %q", tok, hash)
	}
}
