// Package identity finds who is calling the HTTP server, for the REST API and the web page
// alike. A caller is a Principal, found from (in this order) a bearer credential — a config
// token, an API token (tc_…) or a JWT from the company's identity provider —, the trusted
// gateway's user header, or the web page's cookie session.
//
// It also keeps the API tokens users make themselves (tokens.go: the /api/v1/tokens
// handlers, which httpapi routes here) and what the ways in share: the cookie sessions
// (opened, read and ended here; the sign-in pages that open them are httpapi/web's), the
// refusal of cross-site state changes made with a cookie or through the gateway (origin and
// CSRF token), the audit trail's writer (the sign-ins here, the API's answers for httpapi)
// and its listing (audit.go: GET /api/v1/audit, which httpapi routes here), and the
// console's view of a web sign-in (ConsoleAdmin, ConsoleSignInURL, ConsoleSignOut;
// monitor's WebSignIn).
//
// The REST API (httpapi), the web page (httpapi/web), the live event streams
// (httpapi/live) and the webhooks and schedules (httpapi/automation) depend on identity; it
// depends on none of them, only on httpapi/request and httpapi/problem below it (httpapi's
// package comment draws the rooms).
package identity

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/session"
	"github.com/taskcenter/taskcenter/store"
)

// Config are the ways in and what they need.
type Config struct {
	// Tokens are the config tokens: bearer credentials, and what the web page's token sign-in
	// accepts.
	Tokens config.Tokens
	// Store looks API tokens up and keeps the audit trail.
	Store *store.Store
	// OIDC verifies bearer JWTs (and, with a client id, lets httpapi/web sign browsers in).
	// Nil: off.
	OIDC *auth.Provider
	// Gateway believes a gateway's user header from its proxies, and reads client addresses
	// through them. Nil: off.
	Gateway *auth.Gateway
	// AuditLog also writes every audit row to the log (message "audit").
	AuditLog bool
	Logger   *slog.Logger
	// QueryTimeout bounds an API token's lookup. Default 5s.
	QueryTimeout time.Duration
	// TokenDefaultTTL is an API token's lifetime when none is asked for. Default 90 days.
	TokenDefaultTTL time.Duration
	// TokenMaxTTL caps an API token's lifetime. Default 365 days.
	TokenMaxTTL time.Duration
	// Sessions keeps the web page's cookie sessions. Nil turns cookie sessions off (the page
	// is off): only bearer credentials and the gateway identify callers.
	Sessions redis.UniversalClient
	// SessionTTL is how long a sign-in lasts at most. Default 12h.
	SessionTTL time.Duration
	// SessionKey signs session cookies. Default: derived from Tokens (so replicas with the
	// same config agree, and changing the tokens ends every session).
	SessionKey []byte
	// BearerThrottle counts refused bearer credentials per client address and per credential
	// (throttle.go). Without its Redis there is none.
	BearerThrottle BearerThrottle
}

// BearerThrottle configures the throttle of refused bearer credentials (auth.throttle).
type BearerThrottle struct {
	// Redis keeps the counts, shared by every replica. Nil: no throttle.
	Redis redis.UniversalClient
	// Failures is how many refused credentials a client address, and a credential from any
	// address, may present per Window. Default 10.
	Failures int
	// Window is the span Failures counts over. Default 1m.
	Window time.Duration
}

// Service identifies callers, keeps the web page's sessions and writes the audit trail.
type Service struct {
	cfg     Config
	tokens  map[[32]byte]Principal // sha256(config token) → principal
	byPrint map[string]Principal   // config token fingerprint → principal of its sessions
	// sessions are the web page's cookie sessions; nil when they are off.
	sessions *session.Store
	// origins refuses state-changing browser requests from other sites (cookie and gateway
	// requests; a bearer token is not sent by a browser on its own).
	origins *http.CrossOriginProtection
	// throttle counts refused bearer credentials; nil when there is none.
	throttle *session.Throttle
}

// New returns the identity service of cfg.
func New(cfg Config) *Service {
	def := config.Default()
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = def.Database.QueryTimeout
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = def.Web.SessionTTL
	}
	if cfg.TokenDefaultTTL <= 0 {
		cfg.TokenDefaultTTL = def.Auth.APITokens.DefaultTTL
	}
	if cfg.TokenMaxTTL < cfg.TokenDefaultTTL {
		cfg.TokenMaxTTL = max(def.Auth.APITokens.MaxTTL, cfg.TokenDefaultTTL)
	}
	s := &Service{cfg: cfg, tokens: map[[32]byte]Principal{}, byPrint: map[string]Principal{}, origins: http.NewCrossOriginProtection()}
	for _, t := range cfg.Tokens {
		if sum, ok := auth.ConfigTokenSum(t.Token); ok {
			s.tokens[sum] = Principal{User: t.User, Role: t.Role, Via: "token"}
			s.byPrint[hex.EncodeToString(sum[:8])] = Principal{User: t.User, Role: t.Role, Via: "session"} // session.Fingerprint's form
		}
	}
	if cfg.Sessions != nil {
		s.sessions = session.NewStore(cfg.Sessions, sessionPrefix, cfg.SessionTTL).WithSigningKey(sessionKey(cfg))
	}
	if bt := cfg.BearerThrottle; bt.Redis != nil {
		s.throttle = session.NewThrottle(bt.Redis, bearerFailPrefix, cmp.Or(bt.Failures, def.Auth.Throttle.Failures),
			cmp.Or(bt.Window, def.Auth.Throttle.Window)).WithKey(s.ThrottleKey())
	}
	return s
}

// sessionKey is the key that signs session cookies: the configured one, else one derived
// from the config tokens.
func sessionKey(cfg Config) []byte {
	if len(cfg.SessionKey) > 0 {
		return cfg.SessionKey
	}
	h := sha256.New()
	h.Write([]byte("taskcenter web session key v1\x00"))
	toks := make([]string, 0, len(cfg.Tokens))
	for _, t := range cfg.Tokens {
		toks = append(toks, t.Token+"\x00"+t.User+"\x00"+string(t.Role))
	}
	slices.Sort(toks)
	for _, t := range toks {
		h.Write([]byte(t + "\x00"))
	}
	return h.Sum(nil)
}

// ThrottleKey keys the hashes by which the throttles of refused credentials (the API's, the
// page's and the console's: session.Throttle.WithKey) name a credential in Redis. It comes
// from the session key, so replicas with the same config agree on it.
func (s *Service) ThrottleKey() []byte {
	m := hmac.New(sha256.New, sessionKey(s.cfg))
	m.Write([]byte("taskcenter refused-credential throttle key v1"))
	return m.Sum(nil)
}

// Principal is the caller a credential identifies.
type Principal struct {
	// User is the owner name, in the namespace of the way in (config.QualifiedOwner): a
	// config user's bare name, oidc:<name>:<subject>, gateway:<subject>, or the bare name a
	// subject is mapped to. Ownership, the audit trail and the page all use it as it is.
	User string
	Role config.Role
	// Scopes limit an API token (auth.ScopeRead, ScopeWrite, ScopeAdmin). Nil: every scope the
	// role allows (sessions, JWTs, the gateway, config tokens).
	Scopes []string
	// Via says how the caller signed in, for the audit trail: token (a config token),
	// api_token, jwt, gateway or session.
	Via string
}

// Has reports whether the principal holds scope.
func (p Principal) Has(scope string) bool {
	if scope == auth.ScopeAdmin && p.Role != config.RoleAdmin {
		return false
	}
	return p.Scopes == nil || slices.Contains(p.Scopes, scope)
}

// Scope is what the principal may see: an admin's token without the admin scope sees only
// its owner's tasks.
func (p Principal) Scope() store.Scope {
	return store.Scope{Owner: p.User, Admin: p.Has(auth.ScopeAdmin)}
}

// PrincipalOf is the principal of a user the identity provider or the gateway named.
func PrincipalOf(id auth.Identity, via string) Principal {
	p := Principal{User: id.User, Role: config.RoleUser, Via: via}
	if id.Admin {
		p.Role = config.RoleAdmin
	}
	return p
}

// Principal identifies the caller of an API request: a bearer credential (bearer.go: checked
// first, and a refused one counted by the throttle, which answers 429 too_many_failures past
// its limit: throttle.go);
// without an Authorization header, the trusted gateway's user header (from its proxies
// only); else a web session cookie. Cookie and gateway requests that change state must come
// from this site: a browser behind the gateway sends the gateway's own cookie along on any
// site's form. The error is a problem (401, 403), a failure of the token lookup, or
// auth.ErrProviderUnavailable when a JWT could not be checked; a cross-site refusal (403
// csrf_failed) still names the caller it refused, for the audit trail.
func (s *Service) Principal(r *http.Request) (Principal, error) {
	unauthorized := problem.New(http.StatusUnauthorized, "unauthorized", "send a valid token: Authorization: Bearer <token>")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return Principal{}, s.refuseBearer(r, h, unauthorized)
		}
		p, err := s.bearer(r.Context(), token)
		if pr, ok := errors.AsType[*problem.Problem](err); ok && pr.Status == http.StatusUnauthorized {
			return Principal{}, s.refuseBearer(r, token, pr)
		}
		return p, err
	}
	if id, ok := s.cfg.Gateway.Identify(r); ok {
		p := PrincipalOf(id, "gateway")
		if !safeMethod(r.Method) && s.CrossSite(r) {
			return p, problem.New(http.StatusForbidden, "csrf_failed", "this request came from another site; use the page or the API directly")
		}
		return p, nil
	}
	if s.sessions == nil {
		return Principal{}, unauthorized
	}
	p, d, ok := s.CookieSession(r)
	if !ok {
		return Principal{}, unauthorized
	}
	if !safeMethod(r.Method) && !s.CSRFOK(r, d, "") {
		return p, problem.New(http.StatusForbidden, "csrf_failed",
			"this request came with the page's session cookie but not from the page (origin or CSRF token missing); reload the page and try again")
	}
	return p, nil
}

// AuthenticateAdmin reports whether r comes from an admin (any way in, admin scope); the
// profiling endpoints use it.
func (s *Service) AuthenticateAdmin(r *http.Request) bool {
	p, err := s.Principal(r)
	return err == nil && p.Has(auth.ScopeAdmin)
}
