package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store/tokens"
)

// This file holds the bearer credentials besides the config tokens: API tokens
// managed in the product, and JWTs from the company's identity provider.
//
//	POST   /api/v1/tokens       {name, scopes, expires_at?, owner?}  the token, shown once
//	GET    /api/v1/tokens       the caller's tokens (an admin's: everyone's, ?owner=)
//	DELETE /api/v1/tokens/{id}  revoke at once

// bearer identifies a bearer credential: an API token (tc_…), a config token, or a JWT from
// the identity provider.
func (s *Server) bearer(ctx context.Context, token string) (Principal, error) {
	if strings.HasPrefix(token, auth.APITokenPrefix) {
		ctx, cancel := context.WithTimeout(ctx, s.QueryTimeout)
		defer cancel()
		tok, err := s.Store.APITokenByHash(ctx, auth.HashToken(token))
		if errors.Is(err, tokens.ErrNotFound) {
			return Principal{}, problem(http.StatusUnauthorized, "unauthorized", "the API token is unknown, revoked or expired")
		}
		if err != nil {
			return Principal{}, err
		}
		return Principal{User: tok.Owner, Role: config.Role(tok.Role), Scopes: tok.Scopes, Via: "api_token:" + tok.TokenNo}, nil
	}
	if p, ok := s.configToken(token); ok {
		return p, nil
	}
	if s.Auth.OIDC != nil && strings.Count(token, ".") == 2 {
		id, err := s.Auth.OIDC.VerifyBearer(ctx, token)
		var te *auth.TokenError
		switch {
		case errors.As(err, &te):
			return Principal{}, problem(http.StatusUnauthorized, "unauthorized", te.Reason)
		case errors.Is(err, auth.ErrProviderUnavailable):
			s.Logger.Warn("bearer JWT not checked: identity provider unreachable", "err", err)
			pr := problem(http.StatusServiceUnavailable, "identity_provider_unavailable",
				"the identity provider could not be reached to check the token; try again shortly")
			pr.retryAfter = 10
			return Principal{}, pr
		case err != nil:
			return Principal{}, err
		}
		return identityPrincipal(id, "jwt"), nil
	}
	return Principal{}, problem(http.StatusUnauthorized, "unauthorized", "send a valid token: Authorization: Bearer <token>")
}

// identityPrincipal is the principal of a user the identity provider or the gateway named.
func identityPrincipal(id auth.Identity, via string) Principal {
	p := Principal{User: id.User, Role: config.RoleUser, Via: via}
	if id.Admin {
		p.Role = config.RoleAdmin
	}
	return p
}

// TokenView is an API token as listed; Token is only in the answer that created it.
type TokenView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Owner      string     `json:"owner"`
	Scopes     []string   `json:"scopes"`
	Prefix     string     `json:"prefix"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	Token      string     `json:"token,omitempty"`
}

func tokenView(t *tokens.APIToken) TokenView {
	return TokenView{ID: t.TokenNo, Name: t.Name, Owner: t.Owner, Scopes: t.Scopes, Prefix: t.Prefix, CreatedBy: t.CreatedBy,
		CreatedAt: t.CreatedAt.UTC(), ExpiresAt: t.ExpiresAt.UTC(), LastUsedAt: taskview.UTC(t.LastUsedAt), RevokedAt: taskview.UTC(t.RevokedAt)}
}

// createToken answers POST /api/v1/tokens {name, scopes, expires_at?, owner?}. A user creates
// tokens for themself with at most the scopes they hold; an admin (with the admin scope) for
// anyone, and only an admin grants the admin scope.
func (s tokenRoutes) createToken(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req struct {
		Name      string   `json:"name"`
		Scopes    []string `json:"scopes"`
		ExpiresAt string   `json:"expires_at"`
		Owner     string   `json:"owner"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	owner := p.User
	if req.Owner != "" && req.Owner != p.User {
		if !p.Has(auth.ScopeAdmin) {
			return problem(http.StatusForbidden, "forbidden", "only an admin can create a token for another user")
		}
		owner = req.Owner
	}
	var errs []FieldError
	name := strings.TrimSpace(req.Name)
	if msg := textcheck.Problem(name, 100); msg != "" || name == "" {
		errs = append(errs, FieldError{"name", trimmedOr(msg, "is required: what the token is for, e.g. \"nightly export job\"")})
	}
	if msg := textcheck.Problem(owner, 200); msg != "" {
		errs = append(errs, FieldError{"owner", msg})
	}
	scopes, scopeErrs := tokenScopes(req.Scopes)
	expires, expiryErrs := s.tokenExpiry(req.ExpiresAt, time.Now())
	errs = append(append(errs, scopeErrs...), expiryErrs...)
	if len(errs) > 0 {
		return problem(http.StatusUnprocessableEntity, "invalid_token_request", "the token request has invalid fields").withErrors(errs...)
	}
	for _, sc := range scopes {
		if !p.Has(sc) {
			if sc == auth.ScopeAdmin {
				return problem(http.StatusForbidden, "forbidden", "only an admin (with the admin scope) can grant the admin scope")
			}
			return problem(http.StatusForbidden, "insufficient_scope", fmt.Sprintf("you cannot grant the %s scope: your own credential lacks it", sc))
		}
	}
	role := config.RoleUser
	if slices.Contains(scopes, auth.ScopeAdmin) {
		role = config.RoleAdmin
	}
	token, hash := auth.NewAPIToken()
	tok, err := s.Store.CreateAPIToken(r.Context(), tokens.NewAPIToken{Hash: hash, Prefix: auth.TokenPrefix(token), Owner: owner, Role: string(role),
		Name: name, Scopes: scopes, CreatedBy: p.User, ExpiresAt: expires})
	if err != nil {
		return err
	}
	v := tokenView(tok)
	v.Token = token
	w.Header().Set("Location", "/api/v1/tokens/"+tok.TokenNo)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// tokenScopes reads a token request's scopes: each known, each once, at least one.
func tokenScopes(asked []string) ([]string, []FieldError) {
	var scopes []string
	var errs []FieldError
	for _, sc := range asked {
		if !slices.Contains(auth.AllScopes, sc) {
			errs = append(errs, FieldError{"scopes", fmt.Sprintf("%s is not a scope; use %s", echo(sc), strings.Join(auth.AllScopes, ", "))})
			continue
		}
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if len(asked) == 0 {
		errs = append(errs, FieldError{"scopes", "name at least one of " + strings.Join(auth.AllScopes, ", ")})
	}
	return scopes, errs
}

// tokenExpiry reads a token request's expires_at: default the configured lifetime, at most
// the configured maximum, in the future.
func (s tokenRoutes) tokenExpiry(asked string, now time.Time) (time.Time, []FieldError) {
	if asked == "" {
		return now.Add(s.Auth.TokenDefaultTTL), nil
	}
	t, err := time.Parse(time.RFC3339, asked)
	switch {
	case err != nil:
		return time.Time{}, []FieldError{{"expires_at", "must be an RFC 3339 time such as 2027-03-01T00:00:00Z"}}
	case !t.After(now):
		return time.Time{}, []FieldError{{"expires_at", "must be in the future"}}
	case t.After(now.Add(s.Auth.TokenMaxTTL)):
		return time.Time{}, []FieldError{{"expires_at", fmt.Sprintf("may be at most %s from now (auth.api_tokens.max_ttl)", s.Auth.TokenMaxTTL)}}
	}
	return t, nil
}

// listTokens answers GET /api/v1/tokens[?owner=]: name, scopes, created, last used, expiry.
func (s tokenRoutes) listTokens(w http.ResponseWriter, r *http.Request, p Principal) error {
	owner, err := ownerQuery(r.URL.Query(), p, "tokens")
	if err != nil {
		return err
	}
	list, err := s.Store.ListAPITokens(r.Context(), p.Scope(), owner)
	if err != nil {
		return err
	}
	out := struct {
		Items []TokenView `json:"items"`
	}{Items: make([]TokenView, len(list))}
	for i := range list {
		out.Items[i] = tokenView(&list[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// revokeToken answers DELETE /api/v1/tokens/{id}: the token stops working at once, on every
// replica (each request looks it up).
func (s tokenRoutes) revokeToken(w http.ResponseWriter, r *http.Request, p Principal) error {
	id := r.PathValue("id")
	if msg := textcheck.Problem(id, maxTaskID); msg != "" {
		return invalid("invalid_id", "the token id in the path is not valid: it "+msg, FieldError{"id", msg})
	}
	_, err := s.Store.RevokeAPIToken(r.Context(), id, p.Scope(), p.User)
	if errors.Is(err, tokens.ErrNotFound) {
		return problem(http.StatusNotFound, "token_not_found", "no token with this id is visible to you")
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// tokenRoutes are the handlers of /api/v1/tokens (a small type over the server, one per resource).
type tokenRoutes struct{ *Server }
