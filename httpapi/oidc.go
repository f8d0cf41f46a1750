package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/session"
	"github.com/taskcenter/taskcenter/store/audit"
)

// This file signs browsers in with the company identity provider: the
// authorization code flow with PKCE, for the web page and the console.
//
//	GET /auth/login?next=/path   → the provider's sign-in page
//	GET /auth/callback           ← the provider sends the browser back with a code
//
// The sign-in under way (state, PKCE verifier, nonce, where to go next) is kept in Redis for
// ten minutes under a hash of its state, and the state is also put in a cookie of this
// browser: a callback is honoured only in the browser that started it, once, so nobody can
// sign a victim into the attacker's account with a link. The session it opens is the web
// page's server-side session (internal/session): revocable, and ended on every replica by
// sign-out, which then also ends the provider's session where it offers RP-initiated logout.

const (
	signInPrefix = "taskcenter:web:signin:"
	signInCookie = "taskcenter_signin"
	signInTTL    = 10 * time.Minute
)

// mountSignIn adds the provider sign-in routes when browser sign-in is configured.
func (w *webApp) mountSignIn(mux *http.ServeMux) {
	if !w.api.Auth.OIDC.BrowserSignIn() {
		return
	}
	mux.HandleFunc("GET /auth/login", w.ssoBegin)
	mux.HandleFunc("GET /auth/callback", w.ssoCallback)
}

// baseURL is the scheme and host the browser used.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func secureCookie(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// ssoBegin answers GET /auth/login: off to the provider.
func (w *webApp) ssoBegin(rw http.ResponseWriter, r *http.Request) {
	next := nextPath(r.URL.Query().Get("next"))
	authURL, si, err := w.api.Auth.OIDC.Begin(r.Context(), baseURL(r)+"/auth/callback", next)
	if err != nil {
		w.api.Logger.Warn("browser sign-in: identity provider unreachable", "err", err)
		w.render(rw, r, http.StatusServiceUnavailable, "login", pageData{Next: next, Error: w.dict[w.lang(rw, r)]["login.sso_unavailable"]})
		return
	}
	raw, _ := json.Marshal(si)
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := w.rdb.Set(ctx, signInPrefix+stateKey(si.State), raw, signInTTL).Err(); err != nil {
		w.api.Logger.Error("browser sign-in could not be stored", "err", err)
		w.render(rw, r, http.StatusServiceUnavailable, "login", pageData{Next: next, Error: w.dict[w.lang(rw, r)]["login.unavailable"]})
		return
	}
	// Lax, not Strict: the provider sends the browser back from its own site.
	http.SetCookie(rw, &http.Cookie{Name: signInCookie, Value: si.State, Path: "/auth/", MaxAge: int(signInTTL / time.Second),
		HttpOnly: true, Secure: secureCookie(r), SameSite: http.SameSiteLaxMode})
	rw.Header().Set("Cache-Control", "no-store")
	http.Redirect(rw, r, authURL, http.StatusFound)
}

func stateKey(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// ssoCallback answers GET /auth/callback?code=&state=: the session, or the sign-in page
// saying what went wrong.
func (w *webApp) ssoCallback(rw http.ResponseWriter, r *http.Request) {
	lang := w.lang(rw, r)
	dict := w.dict[lang]
	addr := session.ClientAddr(r)
	http.SetCookie(rw, &http.Cookie{Name: signInCookie, Value: "", Path: "/auth/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	fail := func(status int, detail, message string) {
		if status == http.StatusUnauthorized {
			if err := w.throttle.Failed(r.Context(), addr); err != nil {
				w.api.Logger.Warn("web sign-in throttle unavailable", "err", err)
			}
		}
		w.api.Logger.Warn("browser sign-in failed", "client", addr, "reason", detail)
		w.api.auditSignIn(r, "", "oidc", outcomeOf(status), status, detail)
		w.render(rw, r, status, "login", pageData{Lang: lang, Error: message})
	}
	if blocked, err := w.throttle.Blocked(r.Context(), addr); err == nil && blocked {
		fail(http.StatusTooManyRequests, "throttled", dict["login.sso_failed"])
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, "the identity provider refused: "+truncate(e+" "+q.Get("error_description"), 200), dict["login.sso_failed"])
		return
	}
	state := q.Get("state")
	ck, err := r.Cookie(signInCookie)
	if state == "" || err != nil || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(state)) != 1 {
		fail(http.StatusForbidden, "the sign-in was not started in this browser (state)", dict["login.sso_expired"])
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	raw, err := w.rdb.GetDel(ctx, signInPrefix+stateKey(state)).Bytes()
	cancel()
	var si auth.SignIn
	if err != nil || json.Unmarshal(raw, &si) != nil || si.State != state {
		fail(http.StatusForbidden, "the sign-in expired or was used already", dict["login.sso_expired"])
		return
	}
	id, idToken, err := w.api.Auth.OIDC.Finish(r.Context(), si, q.Get("code"))
	var te *auth.TokenError
	switch {
	case errors.As(err, &te):
		fail(http.StatusUnauthorized, te.Reason, dict["login.sso_failed"])
		return
	case err != nil:
		w.api.Logger.Warn("browser sign-in: identity provider unreachable", "err", err)
		fail(http.StatusServiceUnavailable, "the identity provider could not be reached", dict["login.sso_unavailable"])
		return
	}
	p := identityPrincipal(id, "oidc")
	if !w.openSession(rw, r, session.Data{User: p.User, Role: string(p.Role), Token: "oidc", Via: "oidc", IDToken: idToken}, "oidc", si.Next) {
		w.render(rw, r, http.StatusServiceUnavailable, "login", pageData{Lang: lang, Error: dict["login.unavailable"]})
	}
}

// openWebSession starts a web session for d (a CSRF token is added), sets its cookie, records
// the sign-in and sends the browser to next. It reports false (after logging) when the
// session could not be stored.
func (w *webApp) openSession(rw http.ResponseWriter, r *http.Request, d session.Data, via, next string) bool {
	d.CSRF = session.RandomToken()
	id, err := w.sessions.Create(r.Context(), d)
	if err != nil {
		w.api.Logger.Error("web sign-in could not store the session", "err", err)
		w.api.auditSignIn(r, d.User, via, audit.Error, http.StatusServiceUnavailable, "the session could not be stored")
		return false
	}
	http.SetCookie(rw, &http.Cookie{Name: webSessionCookie, Value: w.sessions.Cookie(id), Path: "/",
		MaxAge: int(w.sessions.TTL() / time.Second), HttpOnly: true, Secure: secureCookie(r), SameSite: http.SameSiteStrictMode})
	w.api.Logger.Info("web sign-in", "user", d.User, "via", via, "client", session.ClientAddr(r))
	w.api.auditSignIn(r, d.User, via, audit.Success, http.StatusSeeOther, "")
	if next != "" {
		http.Redirect(rw, r, next, http.StatusSeeOther)
	}
	return true
}

// gatewaySession opens a web session for the user the trusted gateway names, so the page
// works behind the gateway with its usual cookie and CSRF token.
func (w *webApp) gatewaySession(rw http.ResponseWriter, r *http.Request) (Principal, session.Data, bool) {
	id, ok := w.api.Auth.Gateway.Identify(r)
	if !ok {
		return Principal{}, session.Data{}, false
	}
	p := identityPrincipal(id, "gateway")
	d := session.Data{User: p.User, Role: string(p.Role), Token: "gateway", Via: "gateway", CSRF: session.RandomToken()}
	sid, err := w.sessions.Create(r.Context(), d)
	if err != nil {
		w.api.Logger.Error("gateway sign-in could not store the session", "err", err)
		return Principal{}, session.Data{}, false
	}
	http.SetCookie(rw, &http.Cookie{Name: webSessionCookie, Value: w.sessions.Cookie(sid), Path: "/",
		MaxAge: int(w.sessions.TTL() / time.Second), HttpOnly: true, Secure: secureCookie(r), SameSite: http.SameSiteStrictMode})
	w.api.auditSignIn(r, p.User, "gateway", audit.Success, http.StatusOK, "")
	p.Via = "session"
	return p, d, true
}

// endWebSession ends the request's web session on every replica, records the sign-out, and
// returns where to send the browser: the sign-in page, or the provider's sign-out page
// (RP-initiated logout) for a session it opened, when it offers one.
func (w *webApp) endSession(rw http.ResponseWriter, r *http.Request) (string, error) {
	next := "/login"
	if ck, err := r.Cookie(webSessionCookie); err == nil {
		if id, valid := w.sessions.ID(ck.Value); valid {
			d, live, _ := w.sessions.Get(r.Context(), id)
			if err := w.sessions.Delete(r.Context(), id); err != nil {
				w.api.Logger.Error("web sign-out could not end the session", "err", err)
				return "", err
			}
			if live {
				w.api.record(r.Context(), audit.Event{Actor: d.User, Via: trimmedOr(d.Via, "token"), Action: "auth.sign_out", Outcome: audit.Success,
					Status: http.StatusSeeOther, ClientAddr: w.api.clientAddr(r), RequestID: requestID(r.Context())})
				if d.Via == "oidc" && w.api.Auth.OIDC != nil {
					if u := w.api.Auth.OIDC.EndSessionURL(r.Context(), d.IDToken, baseURL(r)+"/login"); u != "" {
						next = u
					}
				}
			}
		}
	}
	http.SetCookie(rw, &http.Cookie{Name: webSessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return next, nil
}

// auditSignIn records a sign-in or a failed one.
func (s *Server) auditSignIn(r *http.Request, user, via, outcome string, status int, detail string) {
	s.record(r.Context(), audit.Event{Actor: user, Via: via, Action: "auth.sign_in", Outcome: outcome, Status: status, Detail: detail,
		ClientAddr: s.clientAddr(r), RequestID: requestID(r.Context())})
}

// ConsoleAdmin returns the admin signed in to the web page with this request's session (by
// token, with the identity provider, or through the gateway): the console accepts it, so
// one sign-in serves both.
func (s *Server) ConsoleAdmin(r *http.Request) (string, bool) {
	if s.web == nil {
		return "", false
	}
	p, _, ok := s.web.cookieSession(r)
	if !ok {
		if id, gw := s.Auth.Gateway.Identify(r); gw && id.Admin {
			return id.User, true
		}
		return "", false
	}
	return p.User, p.Role == config.RoleAdmin
}

// ConsoleSignInURL is where the console's login page sends admins to sign in with the
// identity provider ("" when browser sign-in is off).
func (s *Server) ConsoleSignInURL(next string) string {
	if s.web == nil || !s.Auth.OIDC.BrowserSignIn() {
		return ""
	}
	return "/auth/login?next=" + url.QueryEscape(next)
}

// ConsoleSignOut ends the web session the console was used with; it returns where to go.
func (s *Server) ConsoleSignOut(rw http.ResponseWriter, r *http.Request) (string, error) {
	if s.web == nil {
		return "", nil
	}
	if _, _, ok := s.web.cookieSession(r); !ok {
		return "", nil
	}
	return s.web.endSession(rw, r)
}
