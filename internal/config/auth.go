package config

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Auth says who may call the API and how: config tokens (bootstrap and development), JWTs
// from the company's identity provider and browser sign-in with it (oidc), a trusted gateway
// (trusted_header), API tokens managed in the product (api_tokens), the throttle of refused
// bearer credentials (throttle), and the audit trail.
type Auth struct {
	// Tokens maps bearer tokens to users. A token may be given as its SHA-256 instead,
	// "sha256:<64 hex digits>", so the config holds no secret. In the environment:
	// TASKCENTER_AUTH_TOKENS="token:user:role,sha256:<hex>:user2:admin". Default: the three
	// demo tokens of configs/taskcenter.yaml (none built in).
	Tokens Tokens `yaml:"tokens"`
	// OIDC accepts bearer JWTs from the company's identity provider and, with a client_id,
	// signs browsers in with it. Off while issuer is empty. Default off.
	OIDC OIDC `yaml:"oidc"`
	// TrustedHeader accepts the user a gateway in front of taskcenter names in a header, from
	// the gateway's addresses only. Off while user is empty. Default off.
	TrustedHeader TrustedHeader `yaml:"trusted_header"`
	// APITokens bounds the tokens users create with POST /api/v1/tokens.
	APITokens APITokens `yaml:"api_tokens"`
	// Throttle bounds refused bearer credentials on the API (/api/*): per client address and
	// per credential. A valid credential always passes.
	Throttle Throttle `yaml:"throttle"`
	// Audit tunes the audit trail (GET /api/v1/audit).
	Audit Audit `yaml:"audit"`
}

// defaultAuth turns nothing on: the tokens come from the file or the environment.
func defaultAuth() Auth {
	return Auth{
		OIDC: OIDC{Scopes: []string{"openid", "profile", "email"}, Algorithms: slices.Clone(SignatureAlgorithms), Leeway: 30 * time.Second,
			JWKSRefreshInterval: 10 * time.Second, JWKSMaxAge: 5 * time.Minute, UserClaim: "sub", AdminClaim: "groups"},
		TrustedHeader: TrustedHeader{AdminValues: []string{"admin"}},
		APITokens:     APITokens{DefaultTTL: 90 * 24 * time.Hour, MaxTTL: 365 * 24 * time.Hour},
		Throttle:      Throttle{Failures: 10, Window: time.Minute},
		Audit:         Audit{Retention: 365 * 24 * time.Hour, Log: true},
	}
}

// validate checks that someone can sign in, and every way of signing in.
func (a Auth) validate(bad func(string, ...any)) {
	if len(a.Tokens) == 0 && !a.OIDC.Enabled() && a.TrustedHeader.User == "" {
		bad("auth.tokens (TASKCENTER_AUTH_TOKENS=token:user:role,...) must list at least one token, unless auth.oidc.issuer or auth.trusted_header.user lets users in")
	}
	a.Tokens.validate(bad)
	a.OIDC.validate(bad)
	a.TrustedHeader.validate(bad)
	if t := a.APITokens; t.DefaultTTL <= 0 || t.MaxTTL < t.DefaultTTL {
		bad("auth.api_tokens.default_ttl must be positive and max_ttl at least default_ttl")
	}
	if t := a.Throttle; t.Failures < 1 || t.Window <= 0 || t.Window > 24*time.Hour {
		bad("auth.throttle.failures must be at least 1 and auth.throttle.window between 1s and 24h")
	}
	if a.Audit.Retention < 0 {
		bad("auth.audit.retention must be 0 (keep for good) or positive")
	}
}

// OIDC configures the company identity provider (OpenID Connect).
type OIDC struct {
	// Issuer is the provider's issuer URL (https://login.example.com/realms/acme): JWTs must
	// carry it as iss, and its discovery document (<issuer>/.well-known/openid-configuration)
	// gives the keys and the sign-in endpoints. https, or http on a loopback address. Default
	// "" (off).
	Issuer string `yaml:"issuer"`
	// Audience is what bearer JWTs must name in aud (the API's identifier at the provider).
	// Default: ClientID.
	Audience string `yaml:"audience"`
	// ClientID is taskcenter's client at the provider, for browser sign-in (authorization code
	// with PKCE) of the web page and the console; ID tokens must name it in aud. Default ""
	// (bearer JWTs only, no browser sign-in).
	ClientID string `yaml:"client_id"`
	// ClientSecret authenticates a confidential client at the token endpoint. Default "" (a
	// public client: PKCE only).
	ClientSecret string `yaml:"client_secret"`
	// RedirectURL is where the provider sends the browser back:
	// https://taskcenter.example.com/auth/callback (register it at the provider). Default:
	// /auth/callback on the host the browser used.
	RedirectURL string `yaml:"redirect_url"`
	// Scopes are asked for at browser sign-in. Default [openid, profile, email].
	Scopes []string `yaml:"scopes"`
	// JWKSURL fetches the signing keys from this URL instead of the discovery document's
	// jwks_uri. Default "" (discovery).
	JWKSURL string `yaml:"jwks_url"`
	// JWKSFile reads the signing keys from this file (a JWKS) instead. Default "".
	JWKSFile string `yaml:"jwks_file"`
	// Algorithms are the signature algorithms accepted; only asymmetric ones may be listed
	// (none and HS* never are). Default [RS256, RS384, RS512, PS256, PS384, PS512, ES256,
	// ES384, ES512, EdDSA].
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed when checking exp, nbf and iat. Default 30s.
	Leeway time.Duration `yaml:"leeway"`
	// JWKSRefreshInterval is the least time between two fetches of the keys when a token names
	// a key id that is not known (key rotation), so made-up key ids cannot hammer the
	// provider. Default 10s.
	JWKSRefreshInterval time.Duration `yaml:"jwks_refresh_interval"`
	// JWKSMaxAge is how long fetched keys are trusted: keys older than this are fetched again
	// before the next token is checked, so a key the provider removed (revoked or rotated
	// out) stops working within this time. While the provider cannot be reached the keys
	// already fetched stay in use. Between jwks_refresh_interval and 1h
	// (TASKCENTER_AUTH_OIDC_JWKS_MAX_AGE). Default 5m.
	JWKSMaxAge time.Duration `yaml:"jwks_max_age"`
	// UserClaim names the claim that is the user: sub, preferred_username, email, or a dotted
	// path into nested claims. Default "sub".
	UserClaim string `yaml:"user_claim"`
	// AdminClaim names the claim (a string or a list; a dotted path such as
	// realm_access.roles works) whose values AdminValues are matched against. Default "groups".
	AdminClaim string `yaml:"admin_claim"`
	// AdminValues: a JWT whose AdminClaim holds one of these is an admin. Default none (no
	// JWT is an admin).
	AdminValues []string `yaml:"admin_values"`
	// Name qualifies the provider's users: the user a JWT or a browser sign-in names by
	// UserClaim is the owner oidc:<name>:<claim value>, never a config user of the same
	// name (see Owner names). Lower-case letters, digits, '.', '-' and '_', at most 64.
	// Default: the issuer's host name (login.example.com). Changing it gives every user of
	// the provider a new name: their tasks, tokens, schedules and webhooks stay with the old.
	Name string `yaml:"name"`
	// MapSubjects names chosen users of the provider as owners of the operator's choosing:
	// UserClaim value → a bare owner name, usually the config user the person already is
	// ({"alice@example.com": "alice"}). Everyone else is oidc:<name>:<claim value>. In the
	// environment: TASKCENTER_AUTH_OIDC_MAP_SUBJECTS="alice@example.com=alice,bob@example.com=bob".
	// Default none.
	MapSubjects SubjectMap `yaml:"map_subjects"`
}

// validate checks the provider's addresses, the keys and the claims, when the issuer is set.
func (o OIDC) validate(bad func(string, ...any)) {
	if o.Enabled() {
		if u, err := url.Parse(o.Issuer); err != nil || u.Host == "" || !(u.Scheme == "https" || (u.Scheme == "http" && isLoopback(u.Hostname()))) {
			bad("auth.oidc.issuer (TASKCENTER_AUTH_OIDC_ISSUER) must be the provider's https issuer URL (http only on a loopback address), got %q", o.Issuer)
		}
		if o.Audience == "" && o.ClientID == "" {
			bad("auth.oidc needs audience (what bearer JWTs name in aud) or client_id (browser sign-in), or both")
		}
		if o.JWKSURL != "" && o.JWKSFile != "" {
			bad("auth.oidc: set jwks_url or jwks_file, not both")
		}
		if o.JWKSURL != "" {
			if !isURL(o.JWKSURL, "https", "http") {
				bad("auth.oidc.jwks_url must be an http(s) URL")
			}
		}
		if o.JWKSFile != "" {
			if _, err := os.Stat(o.JWKSFile); err != nil {
				bad("auth.oidc.jwks_file %q cannot be read: %v", o.JWKSFile, err)
			}
		}
		if o.RedirectURL != "" {
			if !isURL(o.RedirectURL, "https", "http") {
				bad("auth.oidc.redirect_url must be an absolute URL ending in /auth/callback")
			}
		}
		if len(o.Algorithms) == 0 {
			bad("auth.oidc.algorithms must list at least one algorithm")
		}
		for _, a := range o.Algorithms {
			if !slices.Contains(SignatureAlgorithms, a) {
				bad("auth.oidc.algorithms: %q is not accepted; use asymmetric algorithms only (%s)", a, strings.Join(SignatureAlgorithms, ", "))
			}
		}
		if o.Leeway < 0 || o.Leeway > 5*time.Minute {
			bad("auth.oidc.leeway must be between 0 and 5m, got %s", o.Leeway)
		}
		if o.JWKSRefreshInterval < time.Second || o.JWKSMaxAge < o.JWKSRefreshInterval {
			bad("auth.oidc.jwks_refresh_interval must be at least 1s and jwks_max_age at least jwks_refresh_interval")
		}
		if o.JWKSMaxAge > time.Hour {
			bad("auth.oidc.jwks_max_age (TASKCENTER_AUTH_OIDC_JWKS_MAX_AGE) must be at most 1h, so a key the provider removed stops working soon; got %s", o.JWKSMaxAge)
		}
		if o.UserClaim == "" {
			bad("auth.oidc.user_claim must name a claim, e.g. sub or preferred_username")
		}
		if len(o.AdminValues) > 0 && o.AdminClaim == "" {
			bad("auth.oidc.admin_claim must name a claim when admin_values is set")
		}
		if o.Name != "" && !validSourceName(o.Name) {
			bad("auth.oidc.name (TASKCENTER_AUTH_OIDC_NAME) must be 1 to 64 lower-case letters, digits, '.', '-' or '_', got %q", o.Name)
		} else if o.Name == "" && !validSourceName(o.SourceName()) {
			bad("auth.oidc.name (TASKCENTER_AUTH_OIDC_NAME) must be set: the issuer's host name %q is longer than 64 characters", o.SourceName())
		}
		o.MapSubjects.validate("auth.oidc.map_subjects", bad)
	} else if o.ClientID != "" || o.Audience != "" || o.Name != "" || len(o.MapSubjects) > 0 {
		bad("auth.oidc.client_id, audience, name and map_subjects need auth.oidc.issuer")
	}
}

// SourceName is what qualifies the provider's users (oidc:<name>:<subject>): Name, else the
// issuer's host name in lower case (characters a name may not hold become '-').
func (o OIDC) SourceName() string {
	if o.Name != "" {
		return o.Name
	}
	u, err := url.Parse(o.Issuer)
	if err != nil {
		return ""
	}
	return strings.Map(func(r rune) rune {
		if validSourceRune(r) {
			return r
		}
		return '-'
	}, strings.ToLower(u.Hostname()))
}

// OwnerPrefix starts the owner name of every user the provider names (unless mapped).
func (o OIDC) OwnerPrefix() string { return OIDCSource + ":" + o.SourceName() + ":" }

// Enabled reports whether bearer JWTs are accepted.
func (o OIDC) Enabled() bool { return o.Issuer != "" }

// TrustedHeader configures the trusted gateway mode.
type TrustedHeader struct {
	// User is the header the gateway names the user in, e.g. X-Forwarded-User. Default ""
	// (off).
	User string `yaml:"user"`
	// Role is the header the gateway names the user's role or groups in (comma-separated),
	// e.g. X-Forwarded-Groups. Default "" (every gateway user is a user).
	Role string `yaml:"role"`
	// AdminValues: a Role header holding one of these makes an admin. Default [admin].
	AdminValues []string `yaml:"admin_values"`
	// Proxies are the gateway's addresses or ranges (10.0.0.5, 10.0.0.0/24). The headers are
	// believed only on connections from these; from anywhere else they are ignored. Required
	// when User is set.
	Proxies []string `yaml:"proxies"`
	// MapSubjects names chosen gateway users as owners of the operator's choosing: the User
	// header's value → a bare owner name, usually the config user the person already is.
	// Everyone else the gateway names is gateway:<header value>. In the environment:
	// TASKCENTER_AUTH_TRUSTED_HEADER_MAP_SUBJECTS="alice=alice". Default none.
	MapSubjects SubjectMap `yaml:"map_subjects"`
}

// OwnerPrefix starts the owner name of every user the gateway names (unless mapped).
func (th TrustedHeader) OwnerPrefix() string { return GatewaySource + ":" }

// validate checks the header names and the gateway's addresses.
func (th TrustedHeader) validate(bad func(string, ...any)) {
	if th.User != "" {
		if len(th.Proxies) == 0 {
			bad("auth.trusted_header.proxies must list the gateway's addresses or ranges when auth.trusted_header.user is set")
		}
		if !validHeaderName(th.User) || (th.Role != "" && !validHeaderName(th.Role)) {
			bad("auth.trusted_header.user and role must be HTTP header names such as X-Forwarded-User")
		}
		th.MapSubjects.validate("auth.trusted_header.map_subjects", bad)
	} else if len(th.MapSubjects) > 0 {
		bad("auth.trusted_header.map_subjects needs auth.trusted_header.user")
	}
	for _, p := range th.Proxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				bad("auth.trusted_header.proxies: %q is not an address or a range such as 10.0.0.0/24", p)
			}
		}
	}
}

// APITokens bounds the API tokens users create in the product.
type APITokens struct {
	// DefaultTTL is a new token's lifetime when the request names no expires_at. Default 2160h
	// (90 days).
	DefaultTTL time.Duration `yaml:"default_ttl"`
	// MaxTTL is the longest lifetime a token may be given. Default 8760h (365 days).
	MaxTTL time.Duration `yaml:"max_ttl"`
}

// Throttle bounds refused credentials. A refused one counts against the client address it came
// from (behind auth.trusted_header.proxies: the client they name) and against the credential
// itself (a keyed hash of it, in Redis); once either has Failures within Window, further
// refused attempts from that address, or with that credential from any address, answer 429
// until the window ends. A valid credential is checked first and always passes.
type Throttle struct {
	// Failures is how many refused credentials an address, or a credential, may present per
	// Window. Default 10.
	Failures int `yaml:"failures"`
	// Window is the span Failures counts over, from the first refusal. Default 1m.
	Window time.Duration `yaml:"window"`
}

// Audit tunes the audit trail.
type Audit struct {
	// Retention: audit rows older than this are deleted by the cleanup round. 0 keeps them
	// for good. Default 8760h (365 days).
	Retention time.Duration `yaml:"retention"`
	// Log writes every audit row to the log as well (message "audit"), for a log pipeline or
	// SIEM. Default true.
	Log bool `yaml:"log"`
}

// SignatureAlgorithms are the JWT algorithms auth.oidc.algorithms may list.
var SignatureAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Role is what a token may do: a user sees their own tasks, an admin sees all.
type Role string

// Roles a token can carry.
const (
	RoleUser  Role = "user"
	RoleAdmin Role = "admin"
)

// Token is one API credential.
type Token struct {
	Token string `yaml:"token"`
	User  string `yaml:"user"`
	Role  Role   `yaml:"role"`
}

// Tokens is the list of API credentials; it reads "token:user:role,..." from the environment.
type Tokens []Token

// validate checks every token: long enough or a well-formed hash, listed once, with a user
// and a known role.
func (ts Tokens) validate(bad func(string, ...any)) {
	seen := map[string]bool{}
	for i, t := range ts {
		hex, hashed := strings.CutPrefix(t.Token, "sha256:")
		switch {
		case hashed && !isHexSHA256(hex):
			bad("auth.tokens[%d] (user %q): a hashed token is sha256: and 64 hex digits (echo -n TOKEN | sha256sum)", i, t.User)
		case !hashed && len(t.Token) < 16:
			bad("auth.tokens[%d] (user %q): token must be at least 16 characters", i, t.User)
		case seen[t.Token]:
			bad("auth.tokens[%d] (user %q): the same token is listed twice", i, t.User)
		}
		seen[t.Token] = true
		if t.User == "" {
			bad("auth.tokens[%d]: user must be set", i)
		} else if QualifiedOwner(t.User) {
			bad("auth.tokens[%d]: user %q starts like the name of another way in (oidc:, gateway:); a config user's name is bare", i, t.User)
		}
		if t.Role != RoleUser && t.Role != RoleAdmin {
			bad("auth.tokens[%d] (user %q): role must be user or admin, got %q", i, t.User, t.Role)
		}
	}
}

// DecodeEnv parses "token:user:role,token:user:role".
func (t *Tokens) DecodeEnv(s string) error {
	var out Tokens
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) == 4 && parts[0] == "sha256" { // sha256:<hex>:user:role
			parts = []string{"sha256:" + parts[1], parts[2], parts[3]}
		}
		if len(parts) != 3 {
			return fmt.Errorf("token entry %q must be token:user:role or sha256:<hex>:user:role", redact(item))
		}
		out = append(out, Token{Token: parts[0], User: parts[1], Role: Role(parts[2])})
	}
	*t = out
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		if !(r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

// AdminTokens lists the tokens with the admin role.
func (c *Config) AdminTokens() []string {
	var out []string
	for _, t := range c.Auth.Tokens {
		if t.Role == RoleAdmin {
			out = append(out, t.Token)
		}
	}
	return out
}

func redact(s string) string {
	if i := strings.Index(s, ":"); i > 0 {
		return "***" + s[i:]
	}
	return "***"
}

// Owner names. A config token's user is an owner by its bare name (alice), as it always was.
// A user another way in names is qualified by it, so the same name from two of them is never
// the same owner: oidc:<auth.oidc.name>:<claim value> for the identity provider (bearer JWTs
// and browser sign-in alike) and gateway:<header value> for the trusted gateway. An API
// token acts as the owner that made it (or that an admin made it for), qualified or not. A
// source's map_subjects is the operator's statement that chosen users of it are bare
// owners, typically the config users those people already are.
const (
	OIDCSource    = "oidc"
	GatewaySource = "gateway"
	// MaxOwner is the longest owner name the ways in give: a subject of 200 characters
	// behind the longest prefix (oidc:, a 64-character name, ':'), with room to spare. Owner
	// filters and fields accept names up to this long.
	MaxOwner = 300
)

// QualifiedOwner reports whether name is in the namespace of another way in than the config
// (starts with "oidc:" or "gateway:"): no config user, and no mapped subject, may be named so.
func QualifiedOwner(name string) bool {
	return strings.HasPrefix(name, OIDCSource+":") || strings.HasPrefix(name, GatewaySource+":")
}

// SubjectMap maps the users a source names (a JWT's user claim, the gateway's header) to
// bare owner names. In the environment: "subject=owner,subject2=owner2" (a subject may
// contain '=', an owner may not: the last '=' splits).
type SubjectMap map[string]string

// DecodeEnv parses "subject=owner,subject2=owner2".
func (m *SubjectMap) DecodeEnv(s string) error {
	out := SubjectMap{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, "=")
		if i < 0 {
			return fmt.Errorf("entry %q must be subject=owner", item)
		}
		out[strings.TrimSpace(item[:i])] = strings.TrimSpace(item[i+1:])
	}
	*m = out
	return nil
}

// validate checks every entry: a subject and an owner of at most 200 characters without
// control characters, the owner bare (not oidc:… or gateway:…).
func (m SubjectMap) validate(key string, bad func(string, ...any)) {
	for _, subject := range slices.Sorted(maps.Keys(m)) {
		owner := m[subject]
		switch {
		case !validName(subject):
			bad("%s: subject %q must be 1 to 200 characters without control characters", key, subject)
		case !validName(owner):
			bad("%s[%q]: the owner %q must be 1 to 200 characters without control characters", key, subject, owner)
		case QualifiedOwner(owner):
			bad("%s[%q]: the owner %q must be a bare name such as a config user's, not one qualified by a way in", key, subject, owner)
		}
	}
}

// validName reports whether s can be a subject or an owner: 1 to 200 characters of valid
// UTF-8 without control characters.
func validName(s string) bool {
	if s == "" || utf8.RuneCountInString(s) > 200 || !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// validSourceName reports whether s can qualify a source's users: 1 to 64 of a-z, 0-9, '.',
// '-', '_'.
func validSourceName(s string) bool {
	return s != "" && len(s) <= 64 && !strings.ContainsFunc(s, func(r rune) bool { return !validSourceRune(r) })
}

func validSourceRune(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '.' || r == '-' || r == '_'
}
