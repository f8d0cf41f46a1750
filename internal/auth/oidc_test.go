package auth_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

func provider(p *testenv.IdP, change ...func(*auth.OIDCConfig)) *auth.Provider {
	cfg := auth.OIDCConfig{Issuer: p.Issuer(), Audience: "taskcenter-api", ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		Algorithms: []string{"RS256", "ES256"}, Leeway: 5 * time.Second, JWKSRefreshInterval: 200 * time.Millisecond,
		JWKSMaxAge: time.Hour, UserClaim: "sub", AdminClaim: "groups", AdminValues: []string{"taskcenter-admins"}}
	for _, f := range change {
		f(&cfg)
	}
	return auth.NewProvider(cfg)
}

func refused(t *testing.T, prov *auth.Provider, token, reason string) {
	t.Helper()
	_, err := prov.VerifyBearer(context.Background(), token)
	var te *auth.TokenError
	if !errors.As(err, &te) {
		t.Fatalf("want a refusal (%s), got %v", reason, err)
	}
	if !strings.Contains(te.Reason, reason) {
		t.Fatalf("refusal %q, want one saying %q (%v)", te.Reason, reason, te.Err)
	}
}

func TestBearerJWTs(t *testing.T) {
	t.Parallel()
	p := testenv.NewIdP(t)
	prov := provider(p)
	kp := p.Key()

	// The user is qualified by the provider (the issuer's host name), never a bare name a
	// config user could have.
	id, err := prov.VerifyBearer(context.Background(), testenv.Sign(t, kp, p.Claims("alice")))
	if err != nil || id.User != "oidc:127.0.0.1:alice" || id.Subject != "alice" || id.Admin {
		t.Fatalf("a good token: %+v %v", id, err)
	}
	id, err = prov.VerifyBearer(context.Background(), testenv.Sign(t, kp, p.Claims("ops", func(c jwt.MapClaims) {
		c["groups"] = []string{"staff", "taskcenter-admins"}
	})))
	if err != nil || id.User != "oidc:127.0.0.1:ops" || !id.Admin {
		t.Fatalf("an admin's token: %+v %v", id, err)
	}
	within := testenv.Sign(t, kp, p.Claims("alice", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-2 * time.Second).Unix() }))
	if _, err := prov.VerifyBearer(context.Background(), within); err != nil {
		t.Fatalf("a token expired 2s ago is within the 5s leeway: %v", err)
	}

	pub, _ := x509.MarshalPKIXPublicKey(kp.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, p.Claims("mallory"))
	hs.Header["kid"], _ = kp.KeyID()
	hsToken, err := hs.SignedString(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	other, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	other.Kid = "not-published"

	for _, c := range []struct{ name, token, reason string }{
		{"expired", testenv.Sign(t, kp, p.Claims("alice", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() })), "expired"},
		{"no expiry", testenv.Sign(t, kp, p.Claims("alice", func(c jwt.MapClaims) { delete(c, "exp") })), "no expiry"},
		{"not valid yet", testenv.Sign(t, kp, p.Claims("alice", func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() })), "not valid yet"},
		{"wrong audience", testenv.Sign(t, kp, p.Claims("alice", func(c jwt.MapClaims) { c["aud"] = "another-api" })), "audience"},
		{"wrong issuer", testenv.Sign(t, kp, p.Claims("alice", func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" })), "another issuer"},
		{"alg none", unsigned(p.Claims("alice")), "algorithm"},
		{"HS256 keyed with the public key", hsToken, "algorithm"},
		{"unknown kid", testenv.Sign(t, other, p.Claims("alice")), "unknown kid"},
		{"tampered payload", tamper(t, testenv.Sign(t, kp, p.Claims("alice"))), "signature"},
		{"no user", testenv.Sign(t, kp, p.Claims("")), "does not name a user"},
		{"not a JWT", "demo-user-token-alice", "not a signed JWT"},
	} {
		t.Run(c.name, func(t *testing.T) { refused(t, prov, c.token, c.reason) })
	}
}

func unsigned(c jwt.MapClaims) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(b) + "."
}

// tamper changes the payload's subject but keeps the signature.
func tamper(t *testing.T, token string) string {
	parts := strings.Split(token, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	json.Unmarshal(b, &c) //nolint:errcheck
	c["sub"] = "ops"
	b, _ = json.Marshal(c)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
}

// The provider rotates its key: a token signed with the new key is accepted once the keys are
// fetched again (an unknown kid triggers it), tokens of the removed key stop working, and a
// flood of made-up kids fetches the keys at most once per refresh interval.
func TestKeyRotationIsFollowedAndRefetchesAreRateLimited(t *testing.T) {
	t.Parallel()
	p := testenv.NewIdP(t)
	prov := provider(p, func(c *auth.OIDCConfig) { c.JWKSRefreshInterval = 300 * time.Millisecond })
	old := p.Key()
	if _, err := prov.VerifyBearer(context.Background(), testenv.Sign(t, old, p.Claims("alice"))); err != nil {
		t.Fatal(err)
	}
	before := p.JWKSServed.Load()

	fresh := p.Rotate(t)
	time.Sleep(350 * time.Millisecond) // past the refresh interval since the first fetch
	id, err := prov.VerifyBearer(context.Background(), testenv.Sign(t, fresh, p.Claims("bob")))
	if err != nil || id.User != "oidc:127.0.0.1:bob" {
		t.Fatalf("a token of the rotated key: %+v %v", id, err)
	}
	if p.JWKSServed.Load() != before+1 {
		t.Fatalf("the keys were fetched %d times for one rotation", p.JWKSServed.Load()-before)
	}
	refused(t, prov, testenv.Sign(t, old, p.Claims("alice")), "unknown kid")

	// Made-up key ids: at most one fetch per interval, however many tokens.
	fetches := p.JWKSServed.Load()
	for i := range 50 {
		kp := *fresh
		kp.Kid = "made-up-" + string(rune('a'+i%26))
		refused(t, prov, testenv.Sign(t, &kp, p.Claims("mallory")), "unknown kid")
	}
	if n := p.JWKSServed.Load() - fetches; n > 1 {
		t.Fatalf("50 tokens with made-up kids fetched the keys %d times within the refresh interval", n)
	}
}

// The provider's users are named oidc:<name>:<subject> (the configured name, else the
// issuer's host name), except the subjects the operator maps to bare owners; Gives tells the
// names the provider gives now from every other name.
func TestProviderUsersAreQualifiedUnlessMapped(t *testing.T) {
	t.Parallel()
	p := testenv.NewIdP(t)
	prov := provider(p, func(c *auth.OIDCConfig) {
		c.Name = "corp"
		c.MapSubjects = map[string]string{"alice": "alice"}
	})
	for subject, want := range map[string]string{"alice": "alice", "bob": "oidc:corp:bob", "gateway:carol": "oidc:corp:gateway:carol"} {
		id, err := prov.VerifyBearer(context.Background(), testenv.Sign(t, p.Key(), p.Claims(subject)))
		if err != nil || id.User != want || id.Subject != subject {
			t.Errorf("subject %q: %+v %v, want the owner %q", subject, id, err, want)
		}
	}
	for owner, gives := range map[string]bool{"alice": true, "oidc:corp:bob": true, "oidc:corp:alice": false, "bob": false,
		"oidc:127.0.0.1:bob": false, "gateway:bob": false, "oidc:corp:": false} {
		if got := prov.Gives(owner); got != gives {
			t.Errorf("Gives(%q) = %v, want %v", owner, got, gives)
		}
	}
	var off *auth.Provider
	if off.Gives("oidc:corp:bob") {
		t.Error("a provider that is off gives names")
	}
}
