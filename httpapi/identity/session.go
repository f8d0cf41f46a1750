package identity

import (
	"cmp"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/session"
	"github.com/taskcenter/taskcenter/store/audit"
)

// This file is the web page's sessions, as the browser holds them: a server-side session
// (internal/session, as the console's) behind an HttpOnly, SameSite=Strict cookie holding
// the session id signed with HMAC. A request with the cookie and no Authorization header
// acts as the session's user. Every state-changing request made with the cookie must come
// from this origin (Origin, else Referer) and carry the session's CSRF token (X-CSRF-Token
// header, or the csrf form field). The pages that open and end sessions are httpapi/web's.

const (
	sessionCookie = "taskcenter_session"
	sessionPrefix = "taskcenter:web:session:"
)

// CookieSession returns the principal of a request's session cookie.
func (s *Service) CookieSession(r *http.Request) (Principal, session.Data, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || s.sessions == nil {
		return Principal{}, session.Data{}, false
	}
	id, ok := s.sessions.ID(ck.Value)
	if !ok {
		return Principal{}, session.Data{}, false
	}
	d, ok, _ := s.sessions.Get(r.Context(), id)
	if !ok {
		return Principal{}, session.Data{}, false
	}
	if d.Via == "oidc" || d.Via == "gateway" {
		// Opened for a user the provider or the gateway named; it lasts its TTL or until
		// signed out, as long as that way in still gives the name (not after it is turned
		// off or renamed, or the subject's mapping to a config user is removed).
		if !s.sourceGives(d.Via, d.User) {
			return Principal{}, session.Data{}, false
		}
		return Principal{User: d.User, Role: config.Role(d.Role), Via: "session"}, d, true
	}
	// The token must still be configured; its current user and role apply.
	p, ok := s.byPrint[d.Token]
	if !ok || p.User != d.User {
		return Principal{}, session.Data{}, false
	}
	return p, d, true
}

// sourceGives reports whether the way in via (oidc or gateway) gives the owner name user now.
func (s *Service) sourceGives(via, user string) bool {
	if via == "oidc" {
		return s.cfg.OIDC.Gives(user)
	}
	return s.cfg.Gateway.Gives(user)
}

// TokenSignIn reports whether a config token can open a session (any is configured).
func (s *Service) TokenSignIn() bool { return len(s.byPrint) > 0 }

// safeMethod reports whether a request changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// CrossSite reports whether a browser says a request comes from another site
// (net/http.CrossOriginProtection: its Sec-Fetch-Site, else its Origin against the Host). A
// request with neither header is not a browser's and is not refused here.
func (s *Service) CrossSite(r *http.Request) bool { return s.origins.Check(r) != nil }

// CSRFOK checks a cookie request that changes state: not from another site, and the
// session's token (the X-CSRF-Token header, else formToken).
func (s *Service) CSRFOK(r *http.Request, d session.Data, formToken string) bool {
	if s.CrossSite(r) || d.CSRF == "" {
		return false
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = formToken
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(d.CSRF)) == 1
}

// BaseURL is the scheme and host the browser used.
func BaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// SecureCookie reports whether cookies set in answer to r are Secure: the browser came over
// HTTPS.
func SecureCookie(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// OpenSession starts a web session for d (a CSRF token is added), sets its cookie and records
// the sign-in with status, the status the caller then answers with. It reports false (after
// logging) when the session could not be stored.
func (s *Service) OpenSession(rw http.ResponseWriter, r *http.Request, d session.Data, via string, status int) bool {
	d.CSRF = session.RandomToken()
	id, err := s.sessions.Create(r.Context(), d)
	if err != nil {
		s.cfg.Logger.Error("web sign-in could not store the session", "err", err)
		s.AuditSignIn(r, d.User, via, audit.Error, http.StatusServiceUnavailable, "the session could not be stored")
		return false
	}
	http.SetCookie(rw, &http.Cookie{Name: sessionCookie, Value: s.sessions.Cookie(id), Path: "/",
		MaxAge: int(s.sessions.TTL() / time.Second), HttpOnly: true, Secure: SecureCookie(r), SameSite: http.SameSiteStrictMode})
	s.cfg.Logger.Info("web sign-in", "user", d.User, "via", via, "client", s.ClientAddr(r))
	s.AuditSignIn(r, d.User, via, audit.Success, status, "")
	return true
}

// GatewaySession opens a web session for the user the trusted gateway names, so the page
// works behind the gateway with its usual cookie and CSRF token.
func (s *Service) GatewaySession(rw http.ResponseWriter, r *http.Request) (Principal, session.Data, bool) {
	id, ok := s.cfg.Gateway.Identify(r)
	if !ok {
		return Principal{}, session.Data{}, false
	}
	p := PrincipalOf(id, "gateway")
	d := session.Data{User: p.User, Role: string(p.Role), Token: "gateway", Via: "gateway", CSRF: session.RandomToken()}
	sid, err := s.sessions.Create(r.Context(), d)
	if err != nil {
		s.cfg.Logger.Error("gateway sign-in could not store the session", "err", err)
		return Principal{}, session.Data{}, false
	}
	http.SetCookie(rw, &http.Cookie{Name: sessionCookie, Value: s.sessions.Cookie(sid), Path: "/",
		MaxAge: int(s.sessions.TTL() / time.Second), HttpOnly: true, Secure: SecureCookie(r), SameSite: http.SameSiteStrictMode})
	s.AuditSignIn(r, p.User, "gateway", audit.Success, http.StatusOK, "")
	p.Via = "session"
	return p, d, true
}

// AuditSignOut records a sign-out of the session d, or its refusal (a sign-out without the
// session's CSRF token), under the session's user and the way it was opened.
func (s *Service) AuditSignOut(r *http.Request, d session.Data, outcome string, status int, detail string) {
	s.Record(r.Context(), audit.Event{Actor: d.User, Via: cmp.Or(strings.TrimSpace(d.Via), "token"), Action: audit.ActionSignOut, Outcome: outcome,
		Status: status, Detail: detail, ClientAddr: s.ClientAddr(r), RequestID: problem.RequestID(r.Context())})
}

// EndSession ends the request's web session on every replica, records the sign-out, and
// returns where to send the browser: the sign-in page ("/login"), or the provider's sign-out
// page (RP-initiated logout, an absolute URL on the provider's site) for a session it
// opened, when it offers one. The caller answers a sign-out that goes to the provider with a
// page of this site that moves on to it (web.App.Continue): the page's and the console's
// policy (form-action 'self') would block a form's redirect to another site.
func (s *Service) EndSession(rw http.ResponseWriter, r *http.Request) (string, error) {
	next := "/login"
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if id, valid := s.sessions.ID(ck.Value); valid {
			d, live, _ := s.sessions.Get(r.Context(), id)
			if err := s.sessions.Delete(r.Context(), id); err != nil {
				s.cfg.Logger.Error("web sign-out could not end the session", "err", err)
				return "", err
			}
			if live {
				status := http.StatusSeeOther // to the sign-in page
				if d.Via == "oidc" && s.cfg.OIDC != nil {
					if u := s.cfg.OIDC.EndSessionURL(r.Context(), d.IDToken, BaseURL(r)+"/login"); u != "" {
						next, status = u, http.StatusOK // the page that moves on to the provider
					}
				}
				s.AuditSignOut(r, d, audit.Success, status, "")
			}
		}
	}
	http.SetCookie(rw, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return next, nil
}
