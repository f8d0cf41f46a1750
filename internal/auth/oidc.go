package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/taskcenter/taskcenter/internal/config"
)

// OIDCConfig configures the company identity provider (config.OIDC).
type OIDCConfig struct {
	Issuer       string
	Audience     string // bearer JWTs; default ClientID
	ClientID     string // browser sign-in; empty: bearer JWTs only
	ClientSecret string
	RedirectURL  string
	Scopes       []string
	JWKSURL      string
	JWKSFile     string
	Algorithms   []string
	Leeway       time.Duration
	// JWKSRefreshInterval is the least time between two key fetches for unknown key ids.
	JWKSRefreshInterval time.Duration
	// JWKSMaxAge is how long fetched keys are used before they are fetched again (a removed
	// key stops working within it).
	JWKSMaxAge  time.Duration
	UserClaim   string
	AdminClaim  string
	AdminValues []string
	// Name qualifies the provider's users: oidc:<Name>:<user claim>. Default: the issuer's
	// host name (config.OIDC.SourceName).
	Name string
	// MapSubjects maps user claim values to the bare owner names they are instead.
	MapSubjects map[string]string
	// HTTPClient talks to the provider. Default: a client with a 10s timeout.
	HTTPClient *http.Client
	// Clock tells the time: the keys' age and the tokens' exp, nbf and iat. Default time.Now.
	Clock func() time.Time
	// Health is told how each call to the provider went (discovery, keys, code exchange).
	// Nil: nobody.
	Health Health
}

// Health follows the provider's availability (internal/outage's Tracker).
type Health interface {
	// Fail records a call that could not reach the provider or that it failed to answer.
	Fail(err error)
	// OK records a call the provider answered.
	OK()
}

// Provider is the company identity provider: it verifies bearer JWTs and runs the browser
// sign-in (authorization code with PKCE). Its discovery document is fetched when first
// needed, not at start, so taskcenter starts (and config tokens work) while the provider is
// unreachable; a failed discovery is tried again at most every 10 seconds.
type Provider struct {
	cfg    OIDCConfig
	client *http.Client
	names  names // the user claim → the owner

	mu      sync.Mutex
	disc    *discovery
	discErr error
	discAt  time.Time
	keys    *KeySet // static JWKS (jwks_url, jwks_file), else set at discovery
}

type discovery struct {
	provider   *oidc.Provider
	endSession string
	authStyle  oauth2.AuthStyle
}

// TokenError is a JWT that is refused; Reason is said to the caller in the 401 problem.
type TokenError struct {
	Reason string
	Err    error
}

func (e *TokenError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *TokenError) Unwrap() error { return e.Err }

// ErrProviderUnavailable: the provider (its discovery document, its keys, its token endpoint)
// could not be reached or failed to answer, so a token could not be checked or a sign-in
// could not be completed. It says nothing about the token or the user.
var ErrProviderUnavailable = errors.New("the identity provider cannot be reached")

// NewProvider returns the provider, or nil when cfg has no issuer (off).
func NewProvider(cfg OIDCConfig) *Provider {
	if cfg.Issuer == "" {
		return nil
	}
	if cfg.Audience == "" {
		cfg.Audience = cfg.ClientID
	}
	def := config.Default().Auth.OIDC
	if cfg.UserClaim == "" {
		cfg.UserClaim = def.UserClaim
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = []string{"RS256", "ES256"}
	}
	cfg.JWKSRefreshInterval = config.Positive(cfg.JWKSRefreshInterval, def.JWKSRefreshInterval)
	cfg.JWKSMaxAge = config.Positive(cfg.JWKSMaxAge, def.JWKSMaxAge)
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = def.Scopes
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	src := config.OIDC{Issuer: cfg.Issuer, Name: cfg.Name}
	p := &Provider{cfg: cfg, client: cfg.HTTPClient, names: names{prefix: src.OwnerPrefix(), mapped: cfg.MapSubjects}}
	if p.client == nil {
		p.client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.JWKSURL != "" || cfg.JWKSFile != "" {
		p.keys = newKeySet(cfg.JWKSURL, cfg.JWKSFile, p.client, cfg)
	}
	return p
}

// BrowserSignIn reports whether browsers sign in with the provider (a client id is set).
func (p *Provider) BrowserSignIn() bool { return p != nil && p.cfg.ClientID != "" }

// Gives reports whether owner is a name the provider gives its users now (false when off).
func (p *Provider) Gives(owner string) bool { return p != nil && p.names.gives(owner) }

// discover fetches the discovery document once; after a failure, again at most every 10s.
func (p *Provider) discover(ctx context.Context) (*discovery, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.disc != nil {
		return p.disc, nil
	}
	if p.discErr != nil && time.Since(p.discAt) < 10*time.Second {
		return nil, p.discErr
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), p.client), 10*time.Second)
	defer cancel()
	d, err := p.fetchDiscovery(ctx)
	p.discAt = time.Now()
	p.report(err)
	if err != nil {
		p.discErr = fmt.Errorf("%w: %w", ErrProviderUnavailable, err)
		return nil, p.discErr
	}
	p.disc, p.discErr = d, nil
	return d, nil
}

// fetchDiscovery reads the discovery document (p.mu held) and, unless the keys are
// configured, makes the key set it names.
func (p *Provider) fetchDiscovery(ctx context.Context) (*discovery, error) {
	prov, err := oidc.NewProvider(ctx, p.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery at %s: %w", p.cfg.Issuer, err)
	}
	var extra struct {
		JWKSURI     string   `json:"jwks_uri"`
		EndSession  string   `json:"end_session_endpoint"`
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
		PKCEMethods []string `json:"code_challenge_methods_supported"`
	}
	if err := prov.Claims(&extra); err != nil {
		return nil, fmt.Errorf("discovery document: %w", err)
	}
	d := &discovery{provider: prov, endSession: extra.EndSession, authStyle: oauth2.AuthStyleAutoDetect}
	switch {
	case p.cfg.ClientSecret == "":
		d.authStyle = oauth2.AuthStyleInParams // a public client sends its id, no secret
	case slices.Contains(extra.AuthMethods, "client_secret_basic") && slices.Contains(extra.AuthMethods, "client_secret_post"):
		// Both offered: x/oauth2 tries the header first and remembers what works.
	case slices.Contains(extra.AuthMethods, "client_secret_post"):
		d.authStyle = oauth2.AuthStyleInParams
	case slices.Contains(extra.AuthMethods, "client_secret_basic"):
		d.authStyle = oauth2.AuthStyleInHeader
	}
	if p.keys == nil {
		if extra.JWKSURI == "" {
			return nil, errors.New("the discovery document names no jwks_uri")
		}
		p.keys = newKeySet(extra.JWKSURI, "", p.client, p.cfg)
	}
	return d, nil
}

// report tells the health how a call to the provider went: err nil, it answered.
func (p *Provider) report(err error) {
	switch {
	case p.cfg.Health == nil:
	case err != nil:
		p.cfg.Health.Fail(err)
	default:
		p.cfg.Health.OK()
	}
}

// Ping checks that the provider answers, for the outage probe: a GET of the document the
// service needs from it — the discovery document, or the configured jwks_url when tokens are
// checked without discovery (no browser sign-in); nil at once with a jwks_file and no browser
// sign-in, which need nothing from the provider. It reports to nobody: the probe does.
func (p *Provider) Ping(ctx context.Context) error {
	target := strings.TrimSuffix(p.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	switch {
	case p.BrowserSignIn():
	case p.cfg.JWKSURL != "":
		target = p.cfg.JWKSURL
	case p.cfg.JWKSFile != "":
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	res, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20)) //nolint:errcheck // drained for reuse
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", target, res.Status)
	}
	return nil
}

// keySet returns the signing keys: the static JWKS, or the one discovery names.
func (p *Provider) keySet(ctx context.Context) (*KeySet, error) {
	p.mu.Lock()
	ks := p.keys
	p.mu.Unlock()
	if ks != nil {
		return ks, nil
	}
	if _, err := p.discover(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys, nil
}

// VerifyBearer checks a bearer JWT — signature with the provider's keys (an accepted
// asymmetric algorithm only, so neither "none" nor an HMAC keyed with a public key passes),
// iss, aud, and exp, nbf and iat with the configured leeway — and returns the user it names.
// A refused token is a *TokenError; a provider that cannot be reached is
// ErrProviderUnavailable.
func (p *Provider) VerifyBearer(ctx context.Context, raw string) (Identity, error) {
	return p.verify(ctx, raw, p.cfg.Audience, "")
}

func (p *Provider) verify(ctx context.Context, raw, audience, nonce string) (Identity, error) {
	ks, err := p.keySet(ctx)
	if err != nil {
		return Identity{}, err
	}
	keys := &checkedKeys{KeySet: ks}
	v := oidc.NewVerifier(p.cfg.Issuer, keys, &oidc.Config{ClientID: audience, SupportedSigningAlgs: p.cfg.Algorithms,
		SkipExpiryCheck: true, Now: p.cfg.Clock}) // exp, nbf and iat are checked below, with the configured leeway
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return Identity{}, classify(err, keys.err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, &TokenError{Reason: "the token's claims do not decode", Err: err}
	}
	now := p.cfg.Clock()
	exp, hasExp := numericDate(claims["exp"])
	switch {
	case !hasExp:
		return Identity{}, &TokenError{Reason: "the token has no expiry (exp)", Err: errors.New("no exp")}
	case now.After(exp.Add(p.cfg.Leeway)):
		return Identity{}, &TokenError{Reason: "the token has expired", Err: fmt.Errorf("exp %s", exp.UTC().Format(time.RFC3339))}
	}
	if nbf, ok := numericDate(claims["nbf"]); ok && now.Add(p.cfg.Leeway).Before(nbf) {
		return Identity{}, &TokenError{Reason: "the token is not valid yet (nbf)", Err: fmt.Errorf("nbf %s", nbf.UTC().Format(time.RFC3339))}
	}
	if iat, ok := numericDate(claims["iat"]); ok && now.Add(p.cfg.Leeway).Before(iat) {
		return Identity{}, &TokenError{Reason: "the token was issued in the future (iat)", Err: fmt.Errorf("iat %s", iat.UTC().Format(time.RFC3339))}
	}
	if nonce != "" && tok.Nonce != nonce {
		return Identity{}, &TokenError{Reason: "the sign-in answer does not belong to this sign-in (nonce)", Err: errors.New("nonce mismatch")}
	}
	id, err := p.identity(claims)
	if err != nil {
		return Identity{}, err
	}
	id.Expiry = exp
	return id, nil
}

// identity maps claims to the user (UserClaim, qualified as oidc:<name>:<value> unless
// mapped) and the admin role (AdminClaim, AdminValues).
func (p *Provider) identity(claims map[string]any) (Identity, error) {
	user, _ := claimAt(claims, p.cfg.UserClaim).(string)
	if !validUser(user) {
		return Identity{}, &TokenError{Reason: "the token does not name a user (claim " + p.cfg.UserClaim + ")", Err: errors.New("no user")}
	}
	id := Identity{User: p.names.owner(user), Subject: user}
	if p.cfg.AdminClaim != "" && len(p.cfg.AdminValues) > 0 {
		switch v := claimAt(claims, p.cfg.AdminClaim).(type) {
		case string:
			for part := range strings.FieldsSeq(strings.ReplaceAll(v, ",", " ")) {
				id.Admin = id.Admin || slices.Contains(p.cfg.AdminValues, part)
			}
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok && slices.Contains(p.cfg.AdminValues, s) {
					id.Admin = true
				}
			}
		}
	}
	return id, nil
}

// claimAt reads a claim by name, or by a dotted path into nested objects
// (realm_access.roles) when no top-level claim has the whole name.
func claimAt(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

func numericDate(v any) (time.Time, bool) {
	switch n := v.(type) {
	case float64:
		return time.Unix(int64(n), 0), true
	case json.Number:
		f, err := n.Float64()
		return time.Unix(int64(f), 0), err == nil
	}
	return time.Time{}, false
}

// checkedKeys is the key set as one verification sees it: go-oidc folds the key set's error
// into its own message, so the error is kept here and told apart by identity, not by text.
type checkedKeys struct {
	*KeySet
	err error
}

func (c *checkedKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	payload, err := c.KeySet.VerifySignature(ctx, raw)
	c.err = err
	return payload, err
}

// classify turns a failed verification into ErrProviderUnavailable (no keys to check with)
// or a refusal with a reason for the caller: keyErr, the key set's own error, by identity;
// go-oidc's checks before the signature (issuer, audience, algorithm, form), which it
// reports as text only, by their words.
func classify(err, keyErr error) error {
	if keyErr != nil {
		switch {
		case errors.Is(keyErr, ErrProviderUnavailable):
			return keyErr
		case errors.Is(keyErr, errUnknownKey):
			return &TokenError{Reason: "the token is signed with a key the identity provider does not publish (unknown kid)", Err: err}
		case errors.Is(keyErr, errBadSignature):
			return &TokenError{Reason: "the token's signature does not verify", Err: err}
		case errors.Is(keyErr, errMalformed):
			return &TokenError{Reason: "the token is not a signed JWT", Err: err}
		}
		return &TokenError{Reason: "the token could not be verified", Err: err}
	}
	msg := err.Error()
	reason := "the token could not be verified"
	switch {
	case strings.Contains(msg, "unexpected signature algorithm"), strings.Contains(msg, "unsupported algorithm"):
		reason = "the token is signed with an algorithm this service does not accept"
	case strings.Contains(msg, "malformed jwt"), strings.Contains(msg, "compact JWS format"):
		reason = "the token is not a signed JWT"
	case strings.Contains(msg, "issued by a different provider"):
		reason = "the token was issued by another issuer"
	case strings.Contains(msg, "expected audience"):
		reason = "the token is not meant for this service (audience)"
	}
	return &TokenError{Reason: reason, Err: err}
}

// SignIn is a browser sign-in under way: what must be kept until the provider sends the
// browser back.
type SignIn struct {
	State    string `json:"state"`
	Verifier string `json:"verifier"` // PKCE
	Nonce    string `json:"nonce"`
	Next     string `json:"next"`
	Redirect string `json:"redirect"`
}

// Begin starts a browser sign-in: the provider's authorization URL (code flow, PKCE S256,
// state, nonce) and what to keep for Finish.
func (p *Provider) Begin(ctx context.Context, redirectURL, next string) (string, SignIn, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return "", SignIn{}, err
	}
	if p.cfg.RedirectURL != "" {
		redirectURL = p.cfg.RedirectURL
	}
	si := SignIn{State: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(), Next: next, Redirect: redirectURL}
	u := p.oauth(d, redirectURL).AuthCodeURL(si.State, oauth2.S256ChallengeOption(si.Verifier), oidc.Nonce(si.Nonce))
	return u, si, nil
}

func (p *Provider) oauth(d *discovery, redirectURL string) *oauth2.Config {
	ep := d.provider.Endpoint()
	ep.AuthStyle = d.authStyle
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: ep, RedirectURL: redirectURL, Scopes: p.cfg.Scopes}
}

// Finish completes a browser sign-in: it exchanges the code (with the PKCE verifier) and
// verifies the ID token (issuer, audience = client id, nonce, expiry). It returns the user and
// the raw ID token (the hint of an RP-initiated sign-out).
func (p *Provider) Finish(ctx context.Context, si SignIn, code string) (Identity, string, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return Identity{}, "", err
	}
	ectx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, p.client), 15*time.Second)
	defer cancel()
	tok, err := p.oauth(d, si.Redirect).Exchange(ectx, code, oauth2.VerifierOption(si.Verifier))
	var refused *oauth2.RetrieveError
	switch {
	case ctx.Err() != nil:
		return Identity{}, "", ctx.Err() // the browser went away; nobody is told anything
	case errors.As(err, &refused) && refused.Response != nil && refused.Response.StatusCode < http.StatusInternalServerError:
		// The provider answered and refused the code (used, expired, not this client's).
		p.report(nil)
		return Identity{}, "", &TokenError{Reason: "the identity provider did not accept the sign-in code", Err: err}
	case err != nil:
		// Not reached, or it failed to answer (5xx): the code was never judged, so this is
		// no failed sign-in of the user's.
		err = fmt.Errorf("exchange the sign-in code: %w", err)
		p.report(err)
		return Identity{}, "", fmt.Errorf("%w: %w", ErrProviderUnavailable, err)
	}
	p.report(nil)
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, "", &TokenError{Reason: "the identity provider sent no ID token", Err: errors.New("no id_token")}
	}
	id, err := p.verify(ctx, raw, p.cfg.ClientID, si.Nonce)
	return id, raw, err
}

// EndSessionURL is the provider's RP-initiated sign-out URL for a session signed in with
// idToken, returning to postLogout; "" when the provider offers none.
func (p *Provider) EndSessionURL(ctx context.Context, idToken, postLogout string) string {
	d, err := p.discover(ctx)
	if err != nil || d.endSession == "" {
		return ""
	}
	u, err := url.Parse(d.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	if idToken != "" {
		q.Set("id_token_hint", idToken)
	}
	q.Set("client_id", p.cfg.ClientID)
	if postLogout != "" {
		q.Set("post_logout_redirect_uri", postLogout)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
