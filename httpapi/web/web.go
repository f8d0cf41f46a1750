// Package web is the end-user web page ("My tasks") served at /: sign-in, the task list, a
// task's detail, new import and new export. The pages are html/template shells embedded in
// the binary (templates/, with the words of i18n/ and the script and style of assets/); the
// script (assets/app.js) talks to the REST API only, with the session cookie, exactly as a
// bearer client would. Nothing is fetched from elsewhere.
//
// Browser auth: signing in with a token (web.go) or with the company identity provider
// (oidc.go) opens a server-side session, which httpapi/identity keeps: it sets the
// HttpOnly, SameSite=Strict cookie, acts as the session's user on the API, and checks the
// origin and CSRF token of every state-changing request made with the cookie. Bearer
// requests are unchanged.
//
// The page depends on httpapi/identity (and httpapi/problem, httpapi/request below it), never
// on the REST API (httpapi): httpapi mounts the page's routes on its mux and hands it the
// API's problem writer.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/session"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/store/audit"
)

//go:embed assets i18n templates
var files embed.FS

// Config is the page's collaborators and settings.
type Config struct {
	// Identity finds who is signed in and keeps the sessions.
	Identity *identity.Service
	// Redis keeps the sign-ins under way with the identity provider and the sign-in
	// throttle.
	Redis redis.UniversalClient
	// OIDC signs browsers in with the company identity provider when it has a client id.
	// Nil: token sign-in only.
	OIDC   *auth.Provider
	Logger *slog.Logger
	// WriteError answers with the problem for an error, as the API answers its own (logged,
	// and counted against an outage).
	WriteError func(http.ResponseWriter, *http.Request, error)
	// LoginFailures is how many refused sign-ins one client address, and one credential from
	// any address, may make per LoginWindow; further refused ones answer 429 until the window
	// ends (a valid credential always passes). Default 5.
	LoginFailures int
	// LoginWindow is the span LoginFailures counts over. Default 1m.
	LoginWindow time.Duration
	// ConsoleLink is shown to admins as the console's address. Default "/monitor/";
	// "-" hides it.
	ConsoleLink string
}

const (
	webLangCookie = "taskcenter_lang"
	webFailPrefix = "taskcenter:web:login_failures:"
)

// App is the page's state: templates, assets, words, the sign-in throttle.
type App struct {
	cfg      Config
	id       *identity.Service // who is signed in; the sessions
	sso      bool              // browser sign-in with the identity provider (oidc.go)
	rdb      redis.UniversalClient
	throttle *session.Throttle
	pages    map[string]*template.Template
	assets   fs.FS
	version  string // asset cache buster
	dict     map[string]map[string]string
}

// New returns the page; an error means the embedded files are broken.
func New(cfg Config) (*App, error) {
	def := config.Default().Web
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
	w := &App{cfg: cfg, id: cfg.Identity, pages: map[string]*template.Template{}, sso: cfg.OIDC.BrowserSignIn(), rdb: cfg.Redis}
	w.throttle = session.NewThrottle(cfg.Redis, webFailPrefix, cfg.LoginFailures, cfg.LoginWindow).WithKey(cfg.Identity.ThrottleKey())
	var err error
	if w.assets, err = fs.Sub(files, "assets"); err != nil {
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
	if w.dict, err = words(); err != nil {
		return nil, err
	}
	for _, page := range []string{"login", "list", "detail", "import", "export", "continue", "signout"} {
		t, err := template.New("layout.html").Funcs(template.FuncMap{
			"t": func(string) string { return "" }, // replaced per request
		}).ParseFS(files, "templates/layout.html", "templates/filters.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		w.pages[page] = t
	}
	return w, nil
}

// words are the page's words by language: its own (i18n/) and what the product says (the
// message catalogue, which the script renders {code, params} with), one dictionary in which
// a word has one home.
func words() (map[string]map[string]string, error) {
	dict := map[string]map[string]string{}
	for _, lang := range msg.Langs() {
		b, err := files.ReadFile("i18n/" + string(lang) + ".json")
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("web/i18n/%s.json: %w", lang, err)
		}
		dict[string(lang)] = m
	}
	for a, b := range map[string]string{"en": "zh", "zh": "en"} {
		for k := range dict[a] {
			if _, ok := dict[b][k]; !ok {
				return nil, fmt.Errorf("web/i18n/%s.json lacks %q", b, k)
			}
		}
	}
	for _, lang := range msg.Langs() {
		for code, text := range msg.Texts(lang) {
			if _, ok := dict[string(lang)][code]; ok {
				return nil, fmt.Errorf("web/i18n/%s.json repeats the message catalogue's %q", lang, code)
			}
			dict[string(lang)][code] = text
		}
	}
	return dict, nil
}

// lang picks the page language: the ?lang= switch (remembered in a cookie), the cookie, then
// Accept-Language; English by default.
func (w *App) lang(rw http.ResponseWriter, r *http.Request) string {
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
func acceptLanguage(h string) string { return string(msg.ParseLang(h)) }

// pageData is what the templates see.
type pageData struct {
	Lang, Page, User, CSRF, TaskID, Error, Next, Version, ConsoleLink, OtherLang string
	Admin                                                                        bool
	Boot                                                                         template.JS
	// SSO offers sign-in with the company identity provider; TokenLogin the token form.
	SSO, TokenLogin bool
	// Console makes the sign-in page the console's, with Action its form's target and
	// SSOURL its provider link.
	Console        bool
	Action, SSOURL string
	// Refresh is the continue page's meta refresh (its content attribute, escaped).
	Refresh template.HTMLAttr
}

// render writes a page.
func (w *App) render(rw http.ResponseWriter, r *http.Request, status int, page string, d pageData) {
	d.Page, d.Version = page, w.version
	if !d.Console {
		d.SSO, d.TokenLogin = w.sso, w.id.TokenSignIn() || !w.sso
	}
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

// Version is the assets' version, which the pages ask for them with (?v=): the cache buster.
func (w *App) Version() string { return w.version }

// Mount adds the page's routes to mux.
func (w *App) Mount(mux *http.ServeMux) {
	page := func(name string) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) {
			p, d, ok := w.id.CookieSession(r)
			if !ok {
				p, d, ok = w.id.GatewaySession(rw, r)
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
				if _, bad := textcheck.Problem(id, request.MaxID); bad {
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

func (w *App) loginPage(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("lang") {
		w.lang(rw, r)
	}
	w.render(rw, r, http.StatusOK, "login", pageData{Next: nextPath(r.URL.Query().Get("next"))})
}

// ConsoleLogin writes the console's sign-in page in the page's look and the visitor's
// language (monitor's LoginPage): action is the form's target, ssoURL the provider's sign-in
// ("" when off), problem a message key ("" for none) with its {name} values.
func (w *App) ConsoleLogin(rw http.ResponseWriter, r *http.Request, status int, action, ssoURL, problem string, values map[string]string) {
	lang := w.lang(rw, r)
	msg := ""
	if problem != "" {
		msg = w.say(lang, problem, values)
	}
	w.render(rw, r, status, "login", pageData{Lang: lang, Console: true, Action: action, SSOURL: ssoURL, SSO: ssoURL != "",
		TokenLogin: true, Error: msg})
}

// ConsoleSay is the page's words for key, with its {name} values, in the visitor's language
// (monitor's LoginPage): what the console answers in plain text (a job link to no task, a
// throttled credential).
func (w *App) ConsoleSay(rw http.ResponseWriter, r *http.Request, key string, values map[string]string) string {
	return w.say(w.lang(rw, r), key, values)
}

// say is the dictionary's words for key in lang, with its {name} values.
func (w *App) say(lang, key string, values map[string]string) string {
	msg := w.dict[lang][key]
	for k, v := range values {
		msg = strings.ReplaceAll(msg, "{"+k+"}", v)
	}
	return msg
}

// ConsoleSignOutPage writes the console's sign-out page (monitor's LoginPage): a button that
// posts to action. A GET only shows it, so a link or an image elsewhere cannot sign anyone
// out.
func (w *App) ConsoleSignOutPage(rw http.ResponseWriter, r *http.Request, action string) {
	w.render(rw, r, http.StatusOK, "signout", pageData{Console: true, Action: action})
}

// login answers POST /login (form: token, next): a session for the token's user.
func (w *App) login(rw http.ResponseWriter, r *http.Request) {
	lang := w.lang(rw, r)
	dict := w.dict[lang]
	addr := w.id.ClientAddr(r)
	r.Body = http.MaxBytesReader(rw, r.Body, 4<<10)
	token, next := "", "/"
	if err := r.ParseForm(); err == nil {
		token, next = strings.TrimSpace(r.PostForm.Get("token")), nextPath(r.PostForm.Get("next"))
	}
	// Sign-in forms are not cross-site either: a login CSRF would sign the victim in as the
	// attacker.
	if w.id.CrossSite(r) {
		w.id.AuditSignIn(r, "", "token", audit.Denied, http.StatusForbidden, "a sign-in sent from another site")
		w.render(rw, r, http.StatusForbidden, "login", pageData{Lang: lang, Next: next, Error: dict["login.bad_origin"]})
		return
	}
	// Token sign-in takes config tokens only (one-box development and bootstrap): a JWT or an
	// API token pasted here would outlive its own expiry in the session. A valid token is
	// checked first and always passes: junk from the same address cannot lock its owner out.
	p, ok := identity.Principal{}, false
	if token != "" {
		p, ok = w.id.ConfigToken(token)
	}
	if ok {
		if !w.id.OpenSession(rw, r, session.Data{User: p.User, Role: string(p.Role), Token: session.Fingerprint(token)}, "token", http.StatusSeeOther) {
			w.render(rw, r, http.StatusServiceUnavailable, "login", pageData{Lang: lang, Next: next, Error: dict["login.unavailable"]})
			return
		}
		// The form was posted from this site, so the redirect is a same-site navigation and
		// the browser sends the Strict cookie on it.
		http.Redirect(rw, r, next, http.StatusSeeOther)
		return
	}
	if secs, err := w.throttle.Blocked(r.Context(), addr, token); err != nil {
		w.cfg.Logger.Warn("web sign-in throttle unavailable", "err", err)
	} else if secs > 0 {
		rw.Header().Set("Retry-After", fmt.Sprint(secs))
		w.id.AuditSignIn(r, "", "token", audit.Denied, http.StatusTooManyRequests, "too many failed sign-ins from this address")
		w.render(rw, r, http.StatusTooManyRequests, "login", pageData{Lang: lang, Next: next,
			Error: strings.ReplaceAll(dict["login.throttled"], "{s}", fmt.Sprint(secs))})
		return
	}
	if err := w.throttle.Failed(r.Context(), addr, token); err != nil {
		w.cfg.Logger.Warn("web sign-in throttle unavailable", "err", err)
	}
	w.cfg.Logger.Warn("web sign-in failed", "client", addr)
	w.id.AuditSignIn(r, "", "token", audit.Denied, http.StatusUnauthorized, "not a configured token")
	w.render(rw, r, http.StatusUnauthorized, "login", pageData{Lang: lang, Next: next, Error: dict["login.bad_token"]})
}

// logout answers POST /logout (form: csrf): the session ends on every replica.
func (w *App) logout(rw http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(rw, r.Body, 4<<10)
	r.ParseForm() //nolint:errcheck // a missing token fails the check below
	_, d, ok := w.id.CookieSession(r)
	if ok && !w.id.CSRFOK(r, d, r.PostForm.Get("csrf")) {
		pr := problem.New(http.StatusForbidden, "csrf_failed", "sign out from the page's own button")
		w.id.AuditSignOut(r, d, audit.Denied, pr.Status, pr.Code+": "+pr.Detail)
		w.cfg.WriteError(rw, r, pr)
		return
	}
	next, err := w.id.EndSession(rw, r)
	if err != nil {
		w.cfg.WriteError(rw, r, problem.New(http.StatusServiceUnavailable, "unavailable", "the session could not be ended now; try again shortly"))
		return
	}
	if !strings.HasPrefix(next, "/") {
		// The provider's sign-out: the policy's form-action 'self' blocks a redirect of this
		// form to another site, so a page of this site moves on to it.
		w.Continue(rw, r, next)
		return
	}
	http.Redirect(rw, r, next, http.StatusSeeOther)
}

// Continue answers 200 with a page of this site that moves the browser on to target at once
// (a meta refresh, and a link for a browser that ignores it), with no script. It is the hop
// after the provider's callback, so that the navigation to the page starts on this site and
// the browser sends the SameSite=Strict session cookie with it (a redirect would finish
// the navigation the provider's site started, and the browser would leave the cookie out);
// and the hop to the provider's sign-out, which the page's form-action 'self' would block
// as a form's redirect.
func (w *App) Continue(rw http.ResponseWriter, r *http.Request, target string) {
	// The refresh's URL is read up to the end of the attribute: quoted, and a quote in it
	// percent-encoded, it cannot be cut short.
	target = strings.ReplaceAll(target, "'", "%27")
	w.render(rw, r, http.StatusOK, "continue", pageData{Next: target,
		Refresh: template.HTMLAttr(`content="0;url='` + template.HTMLEscapeString(target) + `'"`)}) //nolint:gosec // escaped above
}
