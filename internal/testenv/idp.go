package testenv

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// IdP is a real OpenID provider (mockoidc) in the test process, on a free loopback port,
// shut down when the test ends. Its handlers run under a lock, so a test can rotate its
// signing key between requests without a data race.
type IdP struct {
	*mockoidc.MockOIDC
	mu sync.Mutex
	// JWKSServed counts the key set's fetches, to check that refetches are rate-limited.
	JWKSServed atomic.Int64
}

// Audience is the aud of the tokens Claims makes.
const Audience = "taskcenter-api"

// NewIdP starts a provider for the test.
func NewIdP(t testing.TB) *IdP {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &IdP{MockOIDC: m}
	m.AddMiddleware(func(next http.Handler) http.Handler { //nolint:errcheck // only before Start
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if strings.HasSuffix(r.URL.Path, mockoidc.JWKSEndpoint) {
				p.JWKSServed.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown() }) //nolint:errcheck
	return p
}

// Key is the provider's current signing key.
func (p *IdP) Key() *mockoidc.Keypair {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Keypair
}

// Rotate replaces the provider's signing key (the old one leaves its key set) and returns
// the new one.
func (p *IdP) Rotate(t testing.TB) *mockoidc.Keypair {
	t.Helper()
	kp, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.Keypair = kp
	p.mu.Unlock()
	return kp
}

// Claims are an access token's claims for user (sub and preferred_username), for Audience,
// valid for five minutes, in the "staff" group; change edits them.
func (p *IdP) Claims(user string, change ...func(jwt.MapClaims)) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": p.Issuer(), "aud": Audience, "sub": user, "preferred_username": user, "iat": now.Unix(),
		"nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "groups": []string{"staff"}}
	for _, f := range change {
		f(c)
	}
	return c
}

// Sign signs claims with kp, naming its key id.
func Sign(t testing.TB, kp *mockoidc.Keypair, c jwt.MapClaims) string {
	t.Helper()
	s, err := kp.SignJWT(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Authorize follows a sign-in's authorization URL at the provider as a browser whose user
// consents, and returns the code the provider sends back.
func Authorize(t testing.TB, authURL string) string {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := res.Request.URL.Parse(res.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("the provider's answer to the authorization: %d %q %v", res.StatusCode, res.Header.Get("Location"), err)
	}
	return loc.Query().Get("code")
}
