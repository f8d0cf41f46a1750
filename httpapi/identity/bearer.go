package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/store/tokens"
)

// This file holds the bearer credentials: the config tokens, API tokens managed in the
// product (their routes are in tokens.go), and JWTs from the company's identity
// provider.

// bearer identifies a bearer credential: an API token (tc_…), a config token, or a JWT from
// the identity provider.
func (s *Service) bearer(ctx context.Context, token string) (Principal, error) {
	if strings.HasPrefix(token, auth.APITokenPrefix) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
		defer cancel()
		tok, err := s.cfg.Store.APITokenByHash(ctx, auth.HashToken(token))
		if errors.Is(err, tokens.ErrNotFound) {
			return Principal{}, problem.New(http.StatusUnauthorized, "unauthorized", "the API token is unknown, revoked or expired")
		}
		if err != nil {
			return Principal{}, err
		}
		return Principal{User: tok.Owner, Role: config.Role(tok.Role), Scopes: tok.Scopes, Via: "api_token:" + tok.TokenNo}, nil
	}
	if p, ok := s.ConfigToken(token); ok {
		return p, nil
	}
	if s.cfg.OIDC != nil && strings.Count(token, ".") == 2 {
		id, err := s.cfg.OIDC.VerifyBearer(ctx, token)
		var te *auth.TokenError
		switch {
		case errors.As(err, &te):
			return Principal{}, problem.New(http.StatusUnauthorized, "unauthorized", te.Reason)
		case err != nil:
			// auth.ErrProviderUnavailable among them: httpapi's error table answers it (503
			// naming the provider) and its outage tracker logs it, once per outage.
			return Principal{}, err
		}
		return PrincipalOf(id, "jwt"), nil
	}
	return Principal{}, problem.New(http.StatusUnauthorized, "unauthorized", "send a valid token: Authorization: Bearer <token>")
}

// ConfigToken returns the principal of a config token.
func (s *Service) ConfigToken(token string) (Principal, bool) {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found, p := false, Principal{}
	for k, cand := range s.tokens {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			found, p = true, cand
		}
	}
	return p, found
}
