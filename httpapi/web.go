package httpapi

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/session"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/store/audit"
)

// This file is the end-user web page ("My tasks") served at /: sign-in, the task list, a
// task's detail, new import and new export. The pages are html/template shells embedded in
// the binary; their script (web/assets/app.js) talks to the REST API only, with the session
// cookie, exactly as a bearer client would. Nothing is fetched from elsewhere.
//
// Browser auth: signing in with a token opens a server-side session (internal/session, as
// the console does) and sets an HttpOnly, SameSite=Strict cookie holding the session id
// signed with HMAC. A request with the cookie and no Authorization header acts as the
// token's user. Every state-changing request made with the cookie must come from this
// origin (Origin, else Referer) and carry the session's CSRF token (X-CSRF-Token header,
// or the csrf form field). Bearer requests are unchanged.

//go:embed web
var webFS embed.FS

// WebConfig configures the web page and its sessions.
type WebConfig struct {
	// Disabled turns the page (and cookie sessions) off; the API is unchanged. The page also
	// needs Deps.Redis. Default on.
	Disabled bool
	// SessionTTL is how long a sign-in lasts at most. Default 12h.
	SessionTTL time.Duration
	// LoginFailures is how many failed sign-ins one client address may make per LoginWindow;
	// further attempts answer 429 until the window ends. Default 5.
	LoginFailures int
	// LoginWindow is the span LoginFailures counts over. Default 1m.
	LoginWindow time.Duration
	// SessionKey signs session cookies. Default: derived from the configured tokens (so
	// replicas with the same config agree, and changing the tokens ends every session).
	SessionKey []byte
	// ConsoleLink is shown to admins as the console's address. Default "/monitor/";
	// "-" hides it.
	ConsoleLink string
}

const (
	webSessionCookie = "taskcenter_session"
	webLangCookie    = "taskcenter_lang"
	webSessionPrefix = "taskcenter:web:session:"
	webFailPrefix    = "taskcenter:web:login_failures:"
)

// webApp is the page's state: sessions, templates, assets.
type webApp struct {
	api      *Server // the API's credentials, audit trail and logger
	cfg      WebConfig
	sso      bool // browser sign-in with the identity provider (oidc.go)
	rdb      redis.UniversalClient
	sessions *session.Store
	throttle *session.Throttle
	byPrint  map[string]Principal // token fingerprint → principal
	pages    map[string]*template.Template
	assets   fs.FS
	version  string // asset cache buster
	dict     map[string]map[string]string
}

func newWebApp(rdb redis.UniversalClient, d Deps) (*webApp, error) {
	cfg, def := d.Web, config.Default().Web
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = def.SessionTTL
	}
	if cfg.LoginFailures <= 0 {
		cfg.LoginFailures = def.LoginFailures
	}
	if cfg.LoginWindow <= 0 {
		cfg.LoginWindow = def.LoginWindow
	}
	if cfg.ConsoleLink == "" {
		cfg.ConsoleLink = "/monitor/"
	}
	if cfg.ConsoleLink == "-" {
		cfg.ConsoleLink = ""
	}
	w := &webApp{cfg: cfg, byPrint: map[string]Principal{}, pages: map[string]*template.Template{}, sso: d.Auth.OIDC.BrowserSignIn(), rdb: rdb}
	key := cfg.SessionKey
	if len(key) == 0 {
		h := sha256.New()
		h.Write([]byte("taskcenter web session key v1\x00"))
		toks := make([]string, 0, len(d.Tokens))
		for _, t := range d.Tokens {
			toks = append(toks, t.Token+"\x00"+t.User+"\x00"+string(t.Role))
		}
		slices.Sort(toks)
		for _, t := range toks {
			h.Write([]byte(t + "\x00"))
		}
		key = h.Sum(nil)
	}
	w.sessions = session.NewStore(rdb, webSessionPrefix, cfg.SessionTTL).WithSigningKey(key)
	w.throttle = session.NewThrottle(rdb, webFailPrefix, cfg.LoginFailures, cfg.LoginWindow)
	for _, t := range d.Tokens {
		if sum, ok := auth.ConfigTokenSum(t.Token); ok {
			w.byPrint[hex.EncodeToString(sum[:8])] = Principal{User: t.User, Role: t.Role, Via: "session"} // session.Fingerprint's form
		}
	}
	var err error
	if w.assets, err = fs.Sub(webFS, "web/assets"); err != nil {
		return nil, err
	}
	sum := sha256.New()
	fs.WalkDir(w.assets, ".", func(p string, de fs.DirEntry, err error) error { //nolint:errcheck // embedded
		if err == nil && !de.IsDir() {
			b, _ := fs.ReadFile(w.assets, p)
			sum.Write(b)
		}
		return nil
	})
	w.version = hex.EncodeToString(sum.Sum(nil)[:6])
	w.dict = map[string]map[string]string{}
	for _, lang := range []string{"en", "zh"} {
		b, err := webFS.ReadFile("web/i18n/" + lang + ".json")
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("web/i18n/%s.json: %w", lang, err)
		}
		w.dict[lang] = m
	}
	for k := range w.dict["en"] {
		if _, ok := w.dict["zh"][k]; !ok {
			return nil, fmt.Errorf("web/i18n/zh.json lacks %q", k)
		}
	}
	for _, page := range []string{"login", "list", "detail", "import", "export"} {
		t, err := template.New("layout.html").Funcs(template.FuncMap{
			"t": func(string) string { return "" }, // replaced per request
		}).ParseFS(webFS, "web/templates/layout.html", "web/templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		w.pages[page] = t
	}
	return w, nil
}

// cookieSession returns the principal of a request's session cookie.
func (w *webApp) cookieSession(r *http.Request) (Principal, session.Data, bool) {
	ck, err := r.Cookie(webSessionCookie)
	if err != nil {
		return Principal{}, session.Data{}, false
	}
	id, ok := w.sessions.ID(ck.Value)
	if !ok {
		return Principal{}, session.Data{}, false
	}
	d, ok, _ := w.sessions.Get(r.Context(), id)
	if !ok {
		return Principal{}, session.Data{}, false
	}
	if d.Via == "oidc" || d.Via == "gateway" {
		// Opened for a user the provider or the gateway named; it lasts its TTL or until
		// signed out.
		return Principal{User: d.User, Role: config.Role(d.Role), Via: "session"}, d, true
	}
	// The token must still be configured; its current user and role apply.
	p, ok := w.byPrint[d.Token]
	if !ok || p.User != d.User {
		return Principal{}, session.Data{}, false
	}
	return p, d, true
}

// safeMethod reports whether a request changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// crossSite reports whether a browser says a request comes from another site
// (net/http.CrossOriginProtection: its Sec-Fetch-Site, else its Origin against the Host). A
// request with neither header is not a browser's and is not refused here.
func (s *Server) crossSite(r *http.Request) bool { return s.origins.Check(r) != nil }

// csrfOK checks a cookie request that changes state: not from another site, and the
// session's token.
func (s *Server) csrfOK(r *http.Request, d session.Data, formToken string) bool {
	if s.crossSite(r) || d.CSRF == "" {
		return false
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = formToken
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(d.CSRF)) == 1
}

// principal identifies the caller of an API request: a bearer credential (tokens.go); without
// an Authorization header, the trusted gateway's user header (from its proxies only); else a
// web session cookie. Cookie and gateway requests that change state must come from this
// site: a browser behind the gateway sends the gateway's own cookie along on any site's form.
func (s *Server) principal(r *http.Request) (Principal, error) {
	unauthorized := problem(http.StatusUnauthorized, "unauthorized", "send a valid token: Authorization: Bearer <token>")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return Principal{}, unauthorized
		}
		return s.bearer(r.Context(), strings.TrimSpace(token))
	}
	if id, ok := s.Auth.Gateway.Identify(r); ok {
		if !safeMethod(r.Method) && s.crossSite(r) {
			return Principal{}, problem(http.StatusForbidden, "csrf_failed", "this request came from another site; use the page or the API directly")
		}
		return identityPrincipal(id, "gateway"), nil
	}
	if s.web == nil {
		return Principal{}, unauthorized
	}
	p, d, ok := s.web.cookieSession(r)
	if !ok {
		return Principal{}, unauthorized
	}
	if !safeMethod(r.Method) && !s.csrfOK(r, d, "") {
		return Principal{}, problem(http.StatusForbidden, "csrf_failed",
			"this request came with the page's session cookie but not from the page (origin or CSRF token missing); reload the page and try again")
	}
	return p, nil
}

// lang picks the page language: the ?lang= switch (remembered in a cookie), the cookie, then
// Accept-Language; English by default.
func (w *webApp) lang(rw http.ResponseWriter, r *http.Request) string {
	if l := r.URL.Query().Get("lang"); l == "en" || l == "zh" {
		http.SetCookie(rw, &http.Cookie{Name: webLangCookie, Value: l, Path: "/", MaxAge: 365 * 24 * 3600, SameSite: http.SameSiteLaxMode})
		return l
	}
	if ck, err := r.Cookie(webLangCookie); err == nil && (ck.Value == "en" || ck.Value == "zh") {
		return ck.Value
	}
	return acceptLanguage(r.Header.Get("Accept-Language"))
}

// acceptLanguage returns "zh" when Chinese is preferred over English, else "en".
func acceptLanguage(h string) string {
	best, bestQ := "en", -1.0
	for part := range strings.SplitSeq(h, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			fmt.Sscanf(v, "%g", &q) //nolint:errcheck // a bad q counts as 1
		}
		tag = strings.ToLower(tag)
		var l string
		switch {
		case tag == "zh" || strings.HasPrefix(tag, "zh-"):
			l = "zh"
		case tag == "en" || strings.HasPrefix(tag, "en-"):
			l = "en"
		default:
			continue
		}
		if q > bestQ {
			best, bestQ = l, q
		}
	}
	return best
}

// pageData is what the templates see.
type pageData struct {
	Lang, Page, User, CSRF, TaskID, Error, Next, Version, ConsoleLink, OtherLang string
	Admin                                                                        bool
	Boot                                                                         template.JS
	// SSO offers sign-in with the company identity provider; TokenLogin the token form.
	SSO, TokenLogin bool
}

// render writes a page.
func (w *webApp) render(rw http.ResponseWriter, r *http.Request, status int, page string, d pageData) {
	d.Page, d.Version = page, w.version
	d.SSO, d.TokenLogin = w.sso, len(w.byPrint) > 0 || !w.sso
	if d.Lang == "" {
		d.Lang = w.lang(rw, r)
	}
	d.OtherLang = map[string]string{"en": "zh", "zh": "en"}[d.Lang]
	dict := w.dict[d.Lang]
	boot, _ := json.Marshal(map[string]any{"lang": d.Lang, "page": page, "user": d.User, "admin": d.Admin,
		"csrf": d.CSRF, "task": d.TaskID, "console": d.ConsoleLink, "i18n": dict})
	// A JSON data block: < is escaped by json.Marshal, so it cannot close the element.
	d.Boot = template.JS(boot) //nolint:gosec // JSON from json.Marshal, HTML-escaped
	t, err := w.pages[page].Clone()
	if err == nil {
		t = t.Funcs(template.FuncMap{"t": func(key string) string {
			if v, ok := dict[key]; ok {
				return v
			}
			return key
		}})
	}
	var buf bytes.Buffer
	if err == nil {
		err = t.Execute(&buf, d)
	}
	if err != nil {
		http.Error(rw, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := rw.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Vary", "Cookie, Accept-Language")
	rw.WriteHeader(status)
	rw.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

// mountWeb adds the page's routes to mux.
func (w *webApp) mount(mux *http.ServeMux) {
	page := func(name string) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) {
			p, d, ok := w.cookieSession(r)
			if !ok {
				p, d, ok = w.gatewaySession(rw, r)
			}
			if !ok {
				next := r.URL.Path
				http.Redirect(rw, r, "/login?next="+url.QueryEscape(next), http.StatusSeeOther)
				return
			}
			if r.URL.Query().Has("lang") {
				w.lang(rw, r)
				q := r.URL.Query()
				q.Del("lang")
				target := r.URL.Path
				if len(q) > 0 {
					target += "?" + q.Encode()
				}
				http.Redirect(rw, r, target, http.StatusSeeOther)
				return
			}
			pd := pageData{User: p.User, Admin: p.Scope().Admin, CSRF: d.CSRF}
			if pd.Admin {
				pd.ConsoleLink = w.cfg.ConsoleLink
			}
			if name == "detail" {
				id := r.PathValue("id")
				if textcheck.Problem(id, maxTaskID) != "" {
					id = ""
				}
				pd.TaskID = id
			}
			w.render(rw, r, http.StatusOK, name, pd)
		}
	}
	mux.HandleFunc("GET /{$}", page("list"))
	mux.HandleFunc("GET /tasks/{id}", page("detail"))
	mux.HandleFunc("GET /new/import", page("import"))
	mux.HandleFunc("GET /new/export", page("export"))
	mux.HandleFunc("GET /login", w.loginPage)
	mux.HandleFunc("POST /login", w.login)
	mux.HandleFunc("POST /logout", w.logout)
	w.mountSignIn(mux)
	assets := http.FileServerFS(w.assets)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("v") == w.version {
			rw.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			rw.Header().Set("Cache-Control", "no-cache")
		}
		assets.ServeHTTP(rw, r)
	})))
}

// nextPath keeps a post-login redirect on this site.
func nextPath(v string) string {
	if v == "" || !strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") || strings.ContainsAny(v, "\\\r\n") {
		return "/"
	}
	return path.Clean(v)
}

func (w *webApp) loginPage(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("lang") {
		w.lang(rw, r)
	}
	w.render(rw, r, http.StatusOK, "login", pageData{Next: nextPath(r.URL.Query().Get("next"))})
}

// webLogin answers POST /login (form: token, next): a session for the token's user.
func (w *webApp) login(rw http.ResponseWriter, r *http.Request) {
	lang := w.lang(rw, r)
	dict := w.dict[lang]
	addr := session.ClientAddr(r)
	r.Body = http.MaxBytesReader(rw, r.Body, 4<<10)
	token, next := "", "/"
	if err := r.ParseForm(); err == nil {
		token, next = strings.TrimSpace(r.PostForm.Get("token")), nextPath(r.PostForm.Get("next"))
	}
	// Sign-in forms are not cross-site either: a login CSRF would sign the victim in as the
	// attacker.
	if w.api.crossSite(r) {
		w.render(rw, r, http.StatusForbidden, "login", pageData{Lang: lang, Next: next, Error: dict["login.bad_origin"]})
		return
	}
	if blocked, err := w.throttle.Blocked(r.Context(), addr); err != nil {
		w.api.Logger.Warn("web sign-in throttle unavailable", "err", err)
	} else if blocked {
		secs := w.throttle.Wait(r.Context(), addr)
		rw.Header().Set("Retry-After", fmt.Sprint(secs))
		w.render(rw, r, http.StatusTooManyRequests, "login", pageData{Lang: lang, Next: next,
			Error: strings.ReplaceAll(dict["login.throttled"], "{s}", fmt.Sprint(secs))})
		return
	}
	// Token sign-in takes config tokens only (one-box development and bootstrap): a JWT or an
	// API token pasted here would outlive its own expiry in the session.
	p, ok := Principal{}, false
	if token != "" {
		p, ok = w.api.configToken(token)
	}
	if !ok {
		if err := w.throttle.Failed(r.Context(), addr); err != nil {
			w.api.Logger.Warn("web sign-in throttle unavailable", "err", err)
		}
		w.api.Logger.Warn("web sign-in failed", "client", addr)
		w.api.auditSignIn(r, "", "token", audit.Denied, http.StatusUnauthorized, "not a configured token")
		w.render(rw, r, http.StatusUnauthorized, "login", pageData{Lang: lang, Next: next, Error: dict["login.bad_token"]})
		return
	}
	if !w.openSession(rw, r, session.Data{User: p.User, Role: string(p.Role), Token: session.Fingerprint(token)}, "token", next) {
		w.render(rw, r, http.StatusServiceUnavailable, "login", pageData{Lang: lang, Next: next, Error: dict["login.unavailable"]})
	}
}

// webLogout answers POST /logout (form: csrf): the session ends on every replica.
func (w *webApp) logout(rw http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(rw, r.Body, 4<<10)
	r.ParseForm() //nolint:errcheck // a missing token fails the check below
	_, d, ok := w.cookieSession(r)
	if ok && !w.api.csrfOK(r, d, r.PostForm.Get("csrf")) {
		w.api.writeError(rw, r, problem(http.StatusForbidden, "csrf_failed", "sign out from the page's own button"))
		return
	}
	next, err := w.endSession(rw, r)
	if err != nil {
		w.api.writeError(rw, r, problem(http.StatusServiceUnavailable, "unavailable", "the session could not be ended now; try again shortly"))
		return
	}
	http.Redirect(rw, r, next, http.StatusSeeOther)
}
