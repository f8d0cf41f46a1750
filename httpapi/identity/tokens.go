package identity

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store/tokens"
)

// This file manages API tokens, the bearer credentials users create in the product (checked
// with the other ways in by bearer.go). httpapi routes these endpoints here:
//
//	POST   /api/v1/tokens       {name, scopes, expires_at?, owner?}  the token, shown once
//	GET    /api/v1/tokens       the caller's tokens (an admin's: everyone's, ?owner=)
//	DELETE /api/v1/tokens/{id}  revoke at once

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

// CreateToken answers POST /api/v1/tokens {name, scopes, expires_at?, owner?}. A user creates
// tokens for themself with at most the scopes they hold; an admin (with the admin scope) for
// anyone, and only an admin grants the admin scope.
func (s *Service) CreateToken(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req struct {
		Name      string   `json:"name"`
		Scopes    []string `json:"scopes"`
		ExpiresAt string   `json:"expires_at"`
		Owner     string   `json:"owner"`
	}
	if err := request.DecodeJSON(r, &req); err != nil {
		return err
	}
	owner := p.User
	if req.Owner != "" && req.Owner != p.User {
		if !p.Has(auth.ScopeAdmin) {
			return problem.New(http.StatusForbidden, "forbidden", "only an admin can create a token for another user")
		}
		owner = req.Owner
	}
	var errs []problem.FieldError
	name := strings.TrimSpace(req.Name)
	if m, bad := textcheck.Problem(name, 100); bad || name == "" {
		if !bad {
			m = msg.New("field_error.token_name_required")
		}
		errs = append(errs, problem.Field("name", m))
	}
	if m, bad := textcheck.Problem(owner, config.MaxOwner); bad {
		errs = append(errs, problem.Field("owner", m))
	}
	scopes, scopeErrs := tokenScopes(req.Scopes)
	expires, expiryErrs := s.tokenExpiry(req.ExpiresAt, time.Now())
	errs = append(append(errs, scopeErrs...), expiryErrs...)
	if len(errs) > 0 {
		return problem.New(http.StatusUnprocessableEntity, "invalid_token_request", "the token request has invalid fields").WithErrors(errs...)
	}
	for _, sc := range scopes {
		if !p.Has(sc) {
			if sc == auth.ScopeAdmin {
				return problem.New(http.StatusForbidden, "forbidden", "only an admin (with the admin scope) can grant the admin scope")
			}
			return problem.New(http.StatusForbidden, "insufficient_scope", fmt.Sprintf("you cannot grant the %s scope: your own credential lacks it", sc))
		}
	}
	role := config.RoleUser
	if slices.Contains(scopes, auth.ScopeAdmin) {
		role = config.RoleAdmin
	}
	token, hash := auth.NewAPIToken()
	tok, err := s.cfg.Store.CreateAPIToken(r.Context(), tokens.NewAPIToken{Hash: hash, Prefix: auth.TokenPrefix(token), Owner: owner, Role: string(role),
		Name: name, Scopes: scopes, CreatedBy: p.User, ExpiresAt: expires})
	if err != nil {
		return err
	}
	v := tokenView(tok)
	v.Token = token
	w.Header().Set("Location", "/api/v1/tokens/"+tok.TokenNo)
	w.Header().Set("Cache-Control", "no-store")
	request.WriteJSON(w, http.StatusCreated, v)
	return nil
}

// tokenScopes reads a token request's scopes: each known, each once, at least one.
func tokenScopes(asked []string) ([]string, []problem.FieldError) {
	var scopes []string
	var errs []problem.FieldError
	for _, sc := range asked {
		if !slices.Contains(auth.AllScopes, sc) {
			errs = append(errs, problem.Field("scopes", msg.New("field_error.not_a_scope", "value", textcheck.Echo(sc), "scopes", strings.Join(auth.AllScopes, ", "))))
			continue
		}
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if len(asked) == 0 {
		errs = append(errs, problem.Field("scopes", msg.New("field_error.scope_required", "scopes", strings.Join(auth.AllScopes, ", "))))
	}
	return scopes, errs
}

// tokenExpiry reads a token request's expires_at: default the configured lifetime, at most
// the configured maximum, in the future.
func (s *Service) tokenExpiry(asked string, now time.Time) (time.Time, []problem.FieldError) {
	if asked == "" {
		return now.Add(s.cfg.TokenDefaultTTL), nil
	}
	t, err := time.Parse(time.RFC3339, asked)
	switch {
	case err != nil:
		return time.Time{}, []problem.FieldError{problem.Field("expires_at", request.RFC3339Hint("2027-03-01T00:00:00Z"))}
	case !t.After(now):
		return time.Time{}, []problem.FieldError{problem.Field("expires_at", msg.New("field_error.future"))}
	case t.After(now.Add(s.cfg.TokenMaxTTL)):
		return time.Time{}, []problem.FieldError{problem.Field("expires_at", msg.New("field_error.token_ttl", "max", s.cfg.TokenMaxTTL.String(), "setting", "auth.api_tokens.max_ttl"))}
	}
	return t, nil
}

// ListTokens answers GET /api/v1/tokens[?owner=]: name, scopes, created, last used, expiry.
func (s *Service) ListTokens(w http.ResponseWriter, r *http.Request, p Principal) error {
	owner, err := OwnerQuery(r.URL.Query(), p, msg.New("field_error.others_tokens"))
	if err != nil {
		return err
	}
	list, err := s.cfg.Store.ListAPITokens(r.Context(), p.Scope(), owner)
	if err != nil {
		return err
	}
	request.WriteItems(w, list, tokenView)
	return nil
}

// RevokeToken answers DELETE /api/v1/tokens/{id}: the token stops working at once, on every
// replica (each request looks it up).
func (s *Service) RevokeToken(w http.ResponseWriter, r *http.Request, p Principal) error {
	id := r.PathValue("id")
	if m, bad := textcheck.Problem(id, request.MaxID); bad {
		return problem.Invalid("invalid_id", "the token id in the path is not valid: it "+m.English(), problem.Field("id", m))
	}
	_, err := s.cfg.Store.RevokeAPIToken(r.Context(), id, p.Scope(), p.User)
	if errors.Is(err, tokens.ErrNotFound) {
		return problem.Say(http.StatusNotFound, "token_not_found", nil)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// OwnerQuery reads a list's ?owner=: empty (the caller's own, or everyone's for an admin), or
// a user name, which only an admin may give for someone else; others says so when a user
// who is not one asks for someone else's.
func OwnerQuery(q url.Values, p Principal, others msg.Message) (string, error) {
	owner := q.Get("owner")
	if m, bad := textcheck.Problem(owner, config.MaxOwner); bad {
		return "", problem.Invalid("invalid_query", "owner "+m.English(), problem.Field("owner", m))
	}
	if owner != "" && !p.Scope().Admin && owner != p.User {
		return "", problem.Invalid("invalid_query", others.English(), problem.Field("owner", others))
	}
	return owner, nil
}
