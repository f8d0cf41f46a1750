package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	JWKSMaxAge          time.Duration
	UserClaim           string
	AdminClaim          string
	AdminValues         []string
	// Name qualifies the provider's users: oidc:<Name>:<user claim>. Default: the issuer's
	// host name (config.OIDC.SourceName).
	Name string
	// MapSubjects maps user claim values to the bare owner names they are instead.
	MapSubjects map[string]string
	// HTTPClient talks to the provider. Default: a client with a 10s timeout.
	HTTPClient *http.Client
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

// ErrProviderUnavailable: the provider (its discovery document or keys) could not be reached,
// so a token could not be checked.
var ErrProviderUnavailable = errors.New("the identity provider could not be reached")

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
	if cfg.JWKSRefreshInterval <= 0 {
		cfg.JWKSRefreshInterval = def.JWKSRefreshInterval
	}
	if cfg.JWKSMaxAge <= 0 {
		cfg.JWKSMaxAge = def.JWKSMaxAge
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = def.Scopes
	}
	src := config.OIDC{Issuer: cfg.Issuer, Name: cfg.Name}
	p := &Provider{cfg: cfg, client: cfg.HTTPClient, names: names{prefix: src.OwnerPrefix(), mapped: cfg.MapSubjects}}
	if p.client == nil {
		p.client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.JWKSURL != "" || cfg.JWKSFile != "" {
		p.keys = NewKeySet(cfg.JWKSURL, cfg.JWKSFile, p.client, cfg.Algorithms, cfg.JWKSRefreshInterval, cfg.JWKSMaxAge)
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
	prov, err := oidc.NewProvider(ctx, p.cfg.Issuer)
	p.discAt = time.Now()
	if err != nil {
		p.discErr = fmt.Errorf("%w: discovery at %s: %v", ErrProviderUnavailable, p.cfg.Issuer, err)
		return nil, p.discErr
	}
	var extra struct {
		JWKSURI     string   `json:"jwks_uri"`
		EndSession  string   `json:"end_session_endpoint"`
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
		PKCEMethods []string `json:"code_challenge_methods_supported"`
	}
	if err := prov.Claims(&extra); err != nil {
		p.discErr = fmt.Errorf("%w: discovery document: %v", ErrProviderUnavailable, err)
		return nil, p.discErr
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
			p.discErr = fmt.Errorf("%w: the discovery document names no jwks_uri", ErrProviderUnavailable)
			return nil, p.discErr
		}
		p.keys = NewKeySet(extra.JWKSURI, "", p.client, p.cfg.Algorithms, p.cfg.JWKSRefreshInterval, p.cfg.JWKSMaxAge)
	}
	p.disc, p.discErr = d, nil
	return d, nil
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
	v := oidc.NewVerifier(p.cfg.Issuer, ks, &oidc.Config{ClientID: audience, SupportedSigningAlgs: p.cfg.Algorithms,
		SkipExpiryCheck: true}) // exp, nbf and iat are checked below, with the configured leeway
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return Identity{}, classify(err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, &TokenError{Reason: "the token's claims do not decode", Err: err}
	}
	now := time.Now()
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

// classify turns go-oidc's and the key set's errors into a reason for the caller.
func classify(err error) error {
	msg := err.Error()
	reason := "the token could not be verified"
	switch {
	case strings.Contains(msg, errNoKeys.Error()):
		return fmt.Errorf("%w: %v", ErrProviderUnavailable, err)
	case strings.Contains(msg, "unexpected signature algorithm"):
		reason = "the token is signed with an algorithm this service does not accept"
	case strings.Contains(msg, "malformed jwt"), strings.Contains(msg, "compact JWS format"):
		reason = "the token is not a signed JWT"
	case strings.Contains(msg, errUnknownKey.Error()):
		reason = "the token is signed with a key the identity provider does not publish (unknown kid)"
	case strings.Contains(msg, errBadSignature.Error()):
		reason = "the token's signature does not verify"
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
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, p.client), 15*time.Second)
	defer cancel()
	tok, err := p.oauth(d, si.Redirect).Exchange(ctx, code, oauth2.VerifierOption(si.Verifier))
	if err != nil {
		return Identity{}, "", &TokenError{Reason: "the identity provider did not accept the sign-in code", Err: err}
	}
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
