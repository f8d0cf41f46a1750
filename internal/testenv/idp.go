package testenv

import (
	"crypto/rand"
	"encoding/json"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// IdP is a real OpenID provider (mockoidc) in the test process, on a free loopback port,
// shut down when the test ends. Its handlers run under a lock, so a test can rotate its
// signing key between requests without a data race.
//
// Beside mockoidc's endpoints it offers RP-initiated sign-out (end_session_endpoint in its
// discovery document, /oidc/logout) and, once RequireSignIn is called, a provider session as
// a real provider keeps one: an authorization request from a browser without the provider's
// session cookie is answered with a sign-in form, and the sign-out ends that session, so the
// next sign-in asks for credentials again.
type IdP struct {
	*mockoidc.MockOIDC
	mu sync.Mutex
	// JWKSServed counts the key set's fetches, to check that refetches are rate-limited.
	JWKSServed atomic.Int64
	// CredentialsAsked counts the sign-in forms served (RequireSignIn).
	CredentialsAsked atomic.Int64
	accounts         map[string]idpAccount // user name → account; nil: no sign-in asked
	sessions         map[string]string     // provider session cookie → user name
	endSessions      []url.Values          // the end-session requests' queries
}

type idpAccount struct {
	password string
	user     *mockoidc.MockUser
}

// Audience is the aud of the tokens Claims makes.
const Audience = "taskcenter-api"

const (
	idpSessionCookie = "idp_session"
	idpSignIn        = mockoidc.IssuerBase + "/login"
	idpEndSession    = mockoidc.IssuerBase + "/logout"
)

// NewIdP starts a provider for the test on 127.0.0.1.
func NewIdP(t testing.TB) *IdP { return NewIdPAt(t, "127.0.0.1") }

// NewIdPAt starts a provider for the test on host, a loopback address: a browser takes
// 127.0.0.2 for another site than a service on 127.0.0.1, as it would a company's provider.
func NewIdPAt(t testing.TB, host string) *IdP {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &IdP{MockOIDC: m, sessions: map[string]string{}}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	// mockoidc's Start, with the sign-in form and the end-session endpoint added: its
	// endpoints are its exported handlers, its issuer the server's address.
	mux := http.NewServeMux()
	mux.HandleFunc(mockoidc.AuthorizationEndpoint, p.authorize)
	mux.HandleFunc(mockoidc.TokenEndpoint, m.Token)
	mux.HandleFunc(mockoidc.UserinfoEndpoint, m.Userinfo)
	mux.HandleFunc(mockoidc.JWKSEndpoint, func(w http.ResponseWriter, r *http.Request) {
		p.JWKSServed.Add(1)
		m.JWKS(w, r)
	})
	mux.HandleFunc(mockoidc.DiscoveryEndpoint, p.discovery)
	mux.HandleFunc("POST "+idpSignIn, p.signIn)
	mux.HandleFunc("GET "+idpEndSession, p.endSession)
	m.Server = &http.Server{Addr: ln.Addr().String(), ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			defer p.mu.Unlock()
			mux.ServeHTTP(w, r)
		})}
	go m.Server.Serve(ln)              //nolint:errcheck // ErrServerClosed at the end
	t.Cleanup(func() { m.Shutdown() }) //nolint:errcheck
	return p
}

// RequireSignIn makes the provider keep sessions: a browser is asked for a user name and
// password (one of accounts, each the user's password) before its first authorization,
// and is then signed in at the provider until it signs out there.
func (p *IdP) RequireSignIn(password string, users ...*mockoidc.MockUser) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accounts == nil {
		p.accounts = map[string]idpAccount{}
	}
	for _, u := range users {
		p.accounts[u.PreferredUsername] = idpAccount{password: password, user: u}
	}
}

// EndSessions returns the queries of the end-session requests the provider has had.
func (p *IdP) EndSessions() []url.Values {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]url.Values(nil), p.endSessions...)
}

// discovery is mockoidc's document with the end-session endpoint added.
func (p *IdP) discovery(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	p.MockOIDC.Discovery(rec, r)
	doc := map[string]any{}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	doc["end_session_endpoint"] = p.Addr() + idpEndSession
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(doc) //nolint:errcheck
}

var idpSignInForm = template.Must(template.New("signin").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Company sign-in</title><link rel="icon" href="data:,"></head><body><h1>Company sign-in</h1>
<form method="post" action="{{.Action}}"><input type="hidden" name="return" value="{{.Return}}">
<label>User <input id="idp-username" name="username"></label>
<label>Password <input id="idp-password" name="password" type="password"></label>
<button id="idp-submit" type="submit">Sign in</button></form></body></html>`))

// authorize is mockoidc's authorization endpoint behind the provider's session: without
// one (RequireSignIn) the browser gets the sign-in form; with one, the session's user is
// the one the code is for.
func (p *IdP) authorize(w http.ResponseWriter, r *http.Request) {
	if p.accounts != nil {
		ck, err := r.Cookie(idpSessionCookie)
		user := ""
		if err == nil {
			user = p.sessions[ck.Value]
		}
		if user == "" {
			p.CredentialsAsked.Add(1)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			idpSignInForm.Execute(w, map[string]string{"Action": idpSignIn, "Return": r.URL.RequestURI()}) //nolint:errcheck
			return
		}
		p.QueueUser(p.accounts[user].user)
	}
	p.MockOIDC.Authorize(w, r)
}

// signIn checks the sign-in form, opens the provider's session and goes back to the
// authorization request.
func (p *IdP) signIn(w http.ResponseWriter, r *http.Request) {
	user, ret := r.PostFormValue("username"), r.PostFormValue("return")
	a, ok := p.accounts[user]
	if !ok || a.password != r.PostFormValue("password") || !strings.HasPrefix(ret, mockoidc.AuthorizationEndpoint+"?") {
		http.Error(w, "wrong user name or password", http.StatusUnauthorized)
		return
	}
	id := rand.Text()
	p.sessions[id] = user
	http.SetCookie(w, &http.Cookie{Name: idpSessionCookie, Value: id, Path: mockoidc.IssuerBase, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, ret, http.StatusSeeOther)
}

// endSession is RP-initiated sign-out: the provider's session ends and the browser goes to
// post_logout_redirect_uri.
func (p *IdP) endSession(w http.ResponseWriter, r *http.Request) {
	p.endSessions = append(p.endSessions, r.URL.Query())
	if ck, err := r.Cookie(idpSessionCookie); err == nil {
		delete(p.sessions, ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: idpSessionCookie, Value: "", Path: mockoidc.IssuerBase, MaxAge: -1})
	if to := r.URL.Query().Get("post_logout_redirect_uri"); to != "" {
		http.Redirect(w, r, to, http.StatusFound)
		return
	}
	io.WriteString(w, "signed out") //nolint:errcheck
}

// Key is the provider's current signing key.
func (p *IdP) Key() *mockoidc.Keypair {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Keypair
}

// Rotate replaces the provider's signing key (the old one leaves its key set) and returns
// the new one.
func (p *IdP) Rotate(t testing.TB) *mockoidc.Keypair {
	t.Helper()
	kp, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.Keypair = kp
	p.mu.Unlock()
	return kp
}

// Claims are an access token's claims for user (sub and preferred_username), for Audience,
// valid for five minutes, in the "staff" group; change edits them.
func (p *IdP) Claims(user string, change ...func(jwt.MapClaims)) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": p.Issuer(), "aud": Audience, "sub": user, "preferred_username": user, "iat": now.Unix(),
		"nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "groups": []string{"staff"}}
	for _, f := range change {
		f(c)
	}
	return c
}

// Sign signs claims with kp, naming its key id.
func Sign(t testing.TB, kp *mockoidc.Keypair, c jwt.MapClaims) string {
	t.Helper()
	s, err := kp.SignJWT(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Authorize follows a sign-in's authorization URL at the provider as a browser whose user
// consents, and returns the code the provider sends back.
func Authorize(t testing.TB, authURL string) string {
	t.Helper()
	c := NoRedirects()
	res, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := res.Request.URL.Parse(res.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("the provider's answer to the authorization: %d %q %v", res.StatusCode, res.Header.Get("Location"), err)
	}
	return loc.Query().Get("code")
}
