package identity

import (
	"net/http"
	"net/url"

	"github.com/taskcenter/taskcenter/internal/config"
)

// This file lets the console (monitor, through its WebSignIn interface) share the web
// page's sign-in: one sign-in serves both.

// ConsoleAdmin returns the admin signed in to the web page with this request's session (by
// token, with the identity provider, or through the gateway): the console accepts it, so
// one sign-in serves both.
func (s *Service) ConsoleAdmin(r *http.Request) (string, bool) {
	if s.sessions == nil {
		return "", false
	}
	p, _, ok := s.CookieSession(r)
	if !ok {
		if id, gw := s.cfg.Gateway.Identify(r); gw && id.Admin {
			return id.User, true
		}
		return "", false
	}
	return p.User, p.Role == config.RoleAdmin
}

// ConsoleSignInURL is where the console's login page sends admins to sign in with the
// identity provider ("" when browser sign-in is off).
func (s *Service) ConsoleSignInURL(next string) string {
	if s.sessions == nil || !s.cfg.OIDC.BrowserSignIn() {
		return ""
	}
	return "/auth/login?next=" + url.QueryEscape(next)
}

// ConsoleSignOut ends the web session the console was used with; it returns where to go.
func (s *Service) ConsoleSignOut(rw http.ResponseWriter, r *http.Request) (string, error) {
	if s.sessions == nil {
		return "", nil
	}
	if _, _, ok := s.CookieSession(r); !ok {
		return "", nil
	}
	return s.EndSession(rw, r)
}
