package auth_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"sync"
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

// clock is a test's time: it stands still until the test moves it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A key the provider removed stops working once the keys are older than jwks_max_age (by
// default 5 minutes), even though tokens keep naming a key id the key set already knows (no
// unknown kid prompts a fetch): the keys are refreshed on their own schedule.
func TestARemovedKeyStopsWorkingAfterTheKeysMaxAge(t *testing.T) {
	t.Parallel()
	p := testenv.NewIdP(t)
	clk := &clock{now: time.Now()}
	prov := provider(p, func(c *auth.OIDCConfig) {
		c.JWKSRefreshInterval, c.JWKSMaxAge, c.Clock = 10*time.Second, 0, clk.Now // 0: the default max age
	})
	// Tokens valid for a day, so that moving the clock tests the keys' age, not the token's.
	claims := func(user string) jwt.MapClaims {
		return p.Claims(user, func(c jwt.MapClaims) { c["exp"] = time.Now().Add(24 * time.Hour).Unix() })
	}
	removed := p.Key()
	token := testenv.Sign(t, removed, claims("alice"))
	if _, err := prov.VerifyBearer(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	fetches := p.JWKSServed.Load()

	fresh := p.Rotate(t) // the provider removes the key and publishes another
	clk.Advance(4 * time.Minute)
	if _, err := prov.VerifyBearer(context.Background(), token); err != nil {
		t.Fatalf("within jwks_max_age the keys in hand are used: %v", err)
	}
	if n := p.JWKSServed.Load() - fetches; n != 0 {
		t.Fatalf("the keys were fetched %d times within their max age", n)
	}

	clk.Advance(time.Minute + time.Second)
	refused(t, prov, token, "unknown kid")
	if n := p.JWKSServed.Load() - fetches; n != 1 {
		t.Fatalf("the keys past their max age were fetched %d times, want once", n)
	}
	if id, err := prov.VerifyBearer(context.Background(), testenv.Sign(t, fresh, claims("bob"))); err != nil || id.Subject != "bob" {
		t.Fatalf("a token of the published key: %+v %v", id, err)
	}
}

// health records what the provider reports of its calls.
type health struct {
	mu    sync.Mutex
	fails []error
	oks   int
}

func (h *health) Fail(err error) { h.mu.Lock(); h.fails = append(h.fails, err); h.mu.Unlock() }
func (h *health) OK()            { h.mu.Lock(); h.oks++; h.mu.Unlock() }
func (h *health) counts() (fails, oks int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.fails), h.oks
}

// A sign-in whose provider dies between the consent and the callback cannot be completed,
// and says so as the provider's outage (ErrProviderUnavailable), not as a refused code: the
// user did nothing wrong. A code the provider answers and refuses stays a refusal. Each call
// to the provider is reported to the health.
func TestACodeExchangeTheProviderCannotAnswerIsItsOutage(t *testing.T) {
	t.Parallel()
	p := testenv.NewIdP(t)
	h := &health{}
	prov := provider(p, func(c *auth.OIDCConfig) { c.Health = h })
	ctx := context.Background()

	authURL, si, err := prov.Begin(ctx, "http://127.0.0.1:1/auth/callback", "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := prov.Finish(ctx, si, "made-up-code"); !isRefusal(err) {
		t.Fatalf("a code the provider refuses: %v, want a *TokenError", err)
	}
	if fails, oks := h.counts(); fails != 0 || oks != 2 {
		t.Fatalf("discovery and a refused exchange: %d failures, %d answers reported; want 0 and 2", fails, oks)
	}

	code := testenv.Authorize(t, authURL)
	if err := p.Shutdown(); err != nil {
		t.Fatal(err)
	}
	_, _, err = prov.Finish(ctx, si, code)
	if !errors.Is(err, auth.ErrProviderUnavailable) || isRefusal(err) {
		t.Fatalf("the exchange with a stopped provider: %v, want ErrProviderUnavailable and no refusal", err)
	}
	if fails, _ := h.counts(); fails != 1 {
		t.Fatalf("%d failures reported for one exchange that could not reach the provider", fails)
	}
}

func isRefusal(err error) bool {
	var te *auth.TokenError
	return errors.As(err, &te)
}

// Without its keys no token can be checked: that is the provider's outage, reported to the
// health, and the answer once it is back.
func TestTokensCheckedWhileTheKeysCannotBeFetchedAreTheProvidersOutage(t *testing.T) {
	t.Parallel()
	p := testenv.NewIdP(t)
	h := &health{}
	issuer := p.Issuer()
	down := provider(p, func(c *auth.OIDCConfig) { c.Health, c.Issuer = h, "http://127.0.0.1:1/unreachable" })
	_, err := down.VerifyBearer(context.Background(), testenv.Sign(t, p.Key(), p.Claims("alice")))
	if !errors.Is(err, auth.ErrProviderUnavailable) || isRefusal(err) {
		t.Fatalf("a token checked while discovery fails: %v", err)
	}
	if err := down.Ping(context.Background()); err == nil {
		t.Fatal("Ping of an unreachable provider answered nil")
	}
	if fails, _ := h.counts(); fails != 1 {
		t.Fatalf("%d failures reported, want 1 (Ping reports to nobody)", fails)
	}

	// The keys' own URL is down while discovery works.
	h = &health{}
	noKeys := provider(p, func(c *auth.OIDCConfig) { c.Health, c.JWKSURL = h, "http://127.0.0.1:1/jwks" })
	_, err = noKeys.VerifyBearer(context.Background(), testenv.Sign(t, p.Key(), p.Claims("alice")))
	if !errors.Is(err, auth.ErrProviderUnavailable) || isRefusal(err) {
		t.Fatalf("a token checked while the keys cannot be fetched: %v", err)
	}
	if fails, _ := h.counts(); fails != 1 {
		t.Fatalf("%d failures reported for one failed key fetch", fails)
	}

	up := provider(p, func(c *auth.OIDCConfig) { c.Issuer = issuer })
	if err := up.Ping(context.Background()); err != nil {
		t.Fatalf("Ping of a provider that answers: %v", err)
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
