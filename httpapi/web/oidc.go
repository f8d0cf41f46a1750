package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/session"
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
func (w *App) mountSignIn(mux *http.ServeMux) {
	if !w.cfg.OIDC.BrowserSignIn() {
		return
	}
	mux.HandleFunc("GET /auth/login", w.ssoBegin)
	mux.HandleFunc("GET /auth/callback", w.ssoCallback)
}

// ssoBegin answers GET /auth/login: off to the provider.
func (w *App) ssoBegin(rw http.ResponseWriter, r *http.Request) {
	next := nextPath(r.URL.Query().Get("next"))
	authURL, si, err := w.cfg.OIDC.Begin(r.Context(), identity.BaseURL(r)+"/auth/callback", next)
	if err != nil {
		w.cfg.Logger.Warn("browser sign-in: identity provider unreachable", "err", err)
		w.render(rw, r, http.StatusServiceUnavailable, "login", pageData{Next: next, Error: w.dict[w.lang(rw, r)]["login.sso_unavailable"]})
		return
	}
	raw, _ := json.Marshal(si)
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := w.rdb.Set(ctx, signInPrefix+stateKey(si.State), raw, signInTTL).Err(); err != nil {
		w.cfg.Logger.Error("browser sign-in could not be stored", "err", err)
		w.render(rw, r, http.StatusServiceUnavailable, "login", pageData{Next: next, Error: w.dict[w.lang(rw, r)]["login.unavailable"]})
		return
	}
	// Lax, not Strict: the provider sends the browser back from its own site.
	http.SetCookie(rw, &http.Cookie{Name: signInCookie, Value: si.State, Path: "/auth/", MaxAge: int(signInTTL / time.Second),
		HttpOnly: true, Secure: identity.SecureCookie(r), SameSite: http.SameSiteLaxMode})
	rw.Header().Set("Cache-Control", "no-store")
	http.Redirect(rw, r, authURL, http.StatusFound)
}

func stateKey(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// ssoCallback answers GET /auth/callback?code=&state=: the session, or the sign-in page
// saying what went wrong.
func (w *App) ssoCallback(rw http.ResponseWriter, r *http.Request) {
	lang := w.lang(rw, r)
	dict := w.dict[lang]
	addr := w.id.ClientAddr(r)
	http.SetCookie(rw, &http.Cookie{Name: signInCookie, Value: "", Path: "/auth/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	// The sign-in is checked first, so a valid one passes from a throttled address too. A
	// refusal by the provider or the token check counts against the address (a code is good
	// once: counting it would stop nothing); past the limit it answers 429.
	fail := func(status int, detail, message string) {
		if status == http.StatusUnauthorized {
			if secs, err := w.throttle.Blocked(r.Context(), addr, ""); err != nil {
				w.cfg.Logger.Warn("web sign-in throttle unavailable", "err", err)
			} else if secs > 0 {
				rw.Header().Set("Retry-After", fmt.Sprint(secs))
				status, detail = http.StatusTooManyRequests, "too many refused sign-ins from this address: "+detail
			} else if err := w.throttle.Failed(r.Context(), addr, ""); err != nil {
				w.cfg.Logger.Warn("web sign-in throttle unavailable", "err", err)
			}
		}
		w.cfg.Logger.Warn("browser sign-in failed", "client", addr, "reason", detail)
		w.id.AuditSignIn(r, "", "oidc", identity.OutcomeOf(status), status, detail)
		w.render(rw, r, status, "login", pageData{Lang: lang, Error: message})
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
	id, idToken, err := w.cfg.OIDC.Finish(r.Context(), si, q.Get("code"))
	var te *auth.TokenError
	switch {
	case errors.Is(err, auth.ErrProviderUnavailable):
		// The provider was not reached (it died between the consent and this callback): the
		// user's code was never judged, so this is no failed sign-in for the throttle.
		fail(http.StatusServiceUnavailable, "the identity provider cannot be reached", dict["login.sso_unavailable"])
		return
	case errors.As(err, &te):
		fail(http.StatusUnauthorized, te.Reason, dict["login.sso_failed"])
		return
	case err != nil:
		w.cfg.Logger.Warn("browser sign-in could not be completed", "err", err)
		fail(http.StatusServiceUnavailable, "the sign-in could not be completed", dict["login.sso_unavailable"])
		return
	}
	p := identity.PrincipalOf(id, "oidc")
	if !w.id.OpenSession(rw, r, session.Data{User: p.User, Role: string(p.Role), Token: "oidc", Via: "oidc", IDToken: idToken}, "oidc", http.StatusOK) {
		w.render(rw, r, http.StatusServiceUnavailable, "login", pageData{Lang: lang, Error: dict["login.unavailable"]})
		return
	}
	// Not a redirect: this navigation began on the provider's site, and the browser would not
	// send the new SameSite=Strict cookie on a redirect that ends it. The continue page's
	// navigation begins here, so it does.
	w.Continue(rw, r, si.Next)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
