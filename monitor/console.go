package monitor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/session"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
)

// ConsolePath is where the console is mounted. asynqmon is given it as its RootPath, so its
// links, assets and API calls carry the prefix; no StripPrefix is involved.
const ConsolePath = "/monitor"

// ConsoleConfig configures the console.
type ConsoleConfig struct {
	// Username and Password enable HTTP basic auth; empty Password disables it.
	Username, Password string
	// ReadOnly refuses every request that would change a queue or a job (403, pointing to the
	// task API). asynqmon's own read-only mode is switched on too, which hides the buttons.
	// The config default is true: task actions belong to the task API, whose transitions keep
	// the task rows and the queue in step.
	ReadOnly bool
	// AdminTokens are the API admin tokens; one of them, entered at /monitor/login, opens a
	// session, and a Bearer admin token works for scripts.
	AdminTokens []string
	// AdminUsers names the user behind each admin token (token → user), for the task log and
	// the process log. A token not listed acts as "admin".
	AdminUsers map[string]string
	// SessionTTL is how long a login lasts at most. Default 12h.
	SessionTTL time.Duration
	// LoginFailures is how many refused credentials one client address, and one credential
	// from any address, may present per LoginWindow; further refused attempts answer 429 until
	// the window ends (a valid credential always passes). Default 5.
	LoginFailures int
	// LoginWindow is the span LoginFailures counts over. Default 1m.
	LoginWindow time.Duration
	// Tasks is the store the console's job actions go through when it is not read-only.
	// Without it every action is refused as in read-only mode.
	Tasks TaskActions
	// Logger receives one line per console action. Default slog.Default().
	Logger *slog.Logger
	// Web, when set, lets the web page's sign-in serve the console too: an admin signed in
	// there (with a token, the company identity provider or through the gateway) is let in,
	// the login page offers the provider's sign-in, and logout ends that session as well.
	Web WebSignIn
	// Gateway reads client addresses through the trusted proxies (auth.trusted_header.proxies),
	// for the throttle and the audit trail, as the API does. Nil: the connection's peer.
	Gateway *auth.Gateway
	// ThrottleKey keys the hashes the throttle names refused credentials by in Redis (the
	// same on every replica). Default: a fixed key.
	ThrottleKey []byte
	// Page, when set, renders the sign-in page; without it (the web page is off) a plain
	// English one is served.
	Page LoginPage
	// Audit records logins, failed logins and actions in the audit trail (*store.Store).
	// Cancels made through Tasks record their row in the same statement as the change.
	Audit AuditRecorder
}

// WebSignIn is the web page's sign-in as the console uses it (*identity.Service of
// httpapi/identity).
type WebSignIn interface {
	// ConsoleAdmin returns the admin the request's web session (or gateway header) names.
	ConsoleAdmin(r *http.Request) (user string, ok bool)
	// ConsoleSignInURL is where to sign in with the identity provider ("" when off).
	ConsoleSignInURL(next string) string
	// ConsoleSignOut ends the request's web session; it returns where to go ("" for none).
	ConsoleSignOut(w http.ResponseWriter, r *http.Request) (string, error)
}

// LoginPage renders the console's sign-in and sign-out pages in the web page's look and the
// visitor's language (*web.App of httpapi/web).
type LoginPage interface {
	// ConsoleLogin writes the sign-in page: problem is a message key ("" for none) with its
	// {name} values.
	ConsoleLogin(w http.ResponseWriter, r *http.Request, status int, action, ssoURL, problem string, values map[string]string)
	// ConsoleSignOutPage writes the sign-out page: a button posting to action.
	ConsoleSignOutPage(w http.ResponseWriter, r *http.Request, action string)
	// Continue writes a page of this site that moves the browser on to target (the
	// provider's sign-out, which form-action 'self' would block as a redirect).
	Continue(w http.ResponseWriter, r *http.Request, target string)
	// ConsoleSay is the words for a message key, with its {name} values, in the visitor's
	// language: what the console answers in plain text.
	ConsoleSay(w http.ResponseWriter, r *http.Request, key string, values map[string]string) string
}

// AuditRecorder writes audit rows (*store.Store).
type AuditRecorder interface {
	// RecordAudit writes one row.
	RecordAudit(ctx context.Context, e audit.Event) error
	// CountAudit counts one attempt on the row of its client address, minute and kind
	// (audit.Trail.CountAudit), for refusals nobody was identified for.
	CountAudit(ctx context.Context, e audit.Event) (int64, error)
}

var _ AuditRecorder = (*store.Store)(nil)

// TaskActions are the task transitions behind the console's job actions (*store.Store).
type TaskActions interface {
	// CancelBy cancels a task with admin scope on behalf of who.
	CancelBy(ctx context.Context, taskNo string, scope store.Scope, who string) (*store.CancelResult, error)
	// ExpediteRetry makes a RETRY_WAIT task due now.
	ExpediteRetry(ctx context.Context, taskNo string, who string) (*store.Task, error)
	// Get reads a task (the console's way from a task to its job, serveJob).
	Get(ctx context.Context, taskNo string, scope store.Scope) (*store.Task, error)
}

var _ TaskActions = (*store.Store)(nil)

// Console is asynqmon behind admin-only authentication.
//
// Sessions are server-side: the cookie holds a random id, Redis holds its hash with the
// admin's name, the token fingerprint it was opened with and its start, under a TTL of
// SessionTTL. Logout deletes it; every replica sharing the Redis accepts the same sessions;
// a session ends at SessionTTL after login whatever the cookie claims, and when its admin
// token is removed from the config. (A per-user generation counter would also revoke, but
// logging out one browser would end every other session of that admin, and the cookie would
// still have to carry a signed expiry.)
type Console struct {
	cfg ConsoleConfig
	mon *asynqmon.HTTPHandler
	ui  http.Handler // mon, its page kept on this machine (offlinePage)
	// inspector finds a task's job in Redis (serveJob).
	inspector *asynq.Inspector
	rdb       redis.UniversalClient
	sessions  *session.Store
	throttle  *session.Throttle
	tokens    map[[32]byte]string // sha256(token) → user
	logger    *slog.Logger
	// origins refuses a sign-out another site sends (Sec-Fetch-Site, else Origin).
	origins *http.CrossOriginProtection
}

// NewConsole builds the console; it opens its own Redis pools (closed by Close).
func NewConsole(redisOpt asynq.RedisConnOpt, cfg ConsoleConfig) *Console {
	def := config.Default().Console
	cfg.SessionTTL = config.Positive(cfg.SessionTTL, def.SessionTTL)
	cfg.LoginFailures = config.Positive(cfg.LoginFailures, def.LoginFailures)
	cfg.LoginWindow = config.Positive(cfg.LoginWindow, def.LoginWindow)
	readOnly := cfg.ReadOnly || cfg.Tasks == nil
	c := &Console{cfg: cfg, tokens: map[[32]byte]string{}, logger: cfg.Logger, origins: http.NewCrossOriginProtection(),
		mon: asynqmon.New(asynqmon.Options{RootPath: ConsolePath, RedisConnOpt: redisOpt, ReadOnly: readOnly})}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.cfg.ReadOnly = readOnly
	c.ui = offlinePage(c.mon)
	c.rdb, _ = redisOpt.MakeRedisClient().(redis.UniversalClient)
	c.inspector = asynq.NewInspectorFromRedisClient(c.rdb)
	c.sessions = session.NewStore(c.rdb, sessionPrefix, cfg.SessionTTL)
	c.throttle = session.NewThrottle(c.rdb, failuresPrefix, cfg.LoginFailures, cfg.LoginWindow).WithKey(cfg.ThrottleKey)
	for _, t := range cfg.AdminTokens {
		user := cfg.AdminUsers[t]
		if user == "" {
			user = "admin"
		}
		if sum, ok := auth.ConfigTokenSum(t); ok { // a token, or its "sha256:<hex>" form
			c.tokens[sum] = user
		}
	}
	return c
}

// Close closes the console's Redis pools.
func (c *Console) Close() error {
	err := c.mon.Close()
	if c.rdb != nil {
		err = errors.Join(err, c.rdb.Close())
	}
	return err
}

const (
	sessionCookie  = "taskcenter_console"
	sessionPrefix  = "taskcenter:console:session:"
	failuresPrefix = "taskcenter:console:login_failures:"
)

// sessionData is what Redis keeps for a console session (the admin's name, the fingerprint
// of the admin token it was opened with, the login time).
type sessionData = session.Data

// Handler serves the login page and, to admins only, asynqmon.
func (c *Console) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		secureHeaders(w.Header())
		switch r.URL.Path {
		case ConsolePath + "/login":
			c.login(w, r)
			return
		case ConsolePath + "/logout":
			c.logout(w, r)
			return
		}
		who, status, wait := c.authorize(r)
		switch status {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			c.throttled(w, r, wait)
			return
		default:
			if strings.Contains(r.Header.Get("Accept"), "text/html") {
				http.Redirect(w, r, ConsolePath+"/login", http.StatusSeeOther)
				return
			}
			if c.cfg.Password != "" {
				w.Header().Set("WWW-Authenticate", `Basic realm="taskcenter console"`)
			}
			http.Error(w, "the console is for admins: log in at "+ConsolePath+"/login", http.StatusUnauthorized)
			return
		}
		if strings.HasPrefix(r.URL.Path, JobsPath) && r.Method == http.MethodGet {
			c.serveJob(w, r)
			return
		}
		c.serveConsole(w, r, who)
	})
}

// authorize accepts basic auth, a Bearer admin token, or a live session, and names the
// admin. A valid admin credential is checked first and always passes: junk sent from the
// same address (behind a proxy, every client's) can never lock the admin out. Refused
// credentials count against the client address and the credential like failed logins
// (refuse); wait is a throttled request's Retry-After.
func (c *Console) authorize(r *http.Request) (who string, status, wait int) {
	if u, p, ok := r.BasicAuth(); ok && c.cfg.Password != "" {
		if subtle.ConstantTimeCompare([]byte(u), []byte(c.cfg.Username)) == 1 &&
			subtle.ConstantTimeCompare([]byte(p), []byte(c.cfg.Password)) == 1 {
			return c.cfg.Username, http.StatusOK, 0
		}
		status, wait := c.refuse(r, "basic:"+u+":"+p)
		return "", status, wait
	}
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		if user, ok := c.adminToken(token); ok {
			return user, http.StatusOK, 0
		}
		status, wait := c.refuse(r, token)
		return "", status, wait
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if s, ok := c.session(r.Context(), ck.Value); ok {
			return s.User, http.StatusOK, 0
		}
	}
	if c.cfg.Web != nil {
		if user, ok := c.cfg.Web.ConsoleAdmin(r); ok {
			return user, http.StatusOK, 0
		}
	}
	return "", http.StatusUnauthorized, 0
}

// audit records a console login or action; a row that cannot be written is logged. A
// refusal of nobody (a refused credential, a throttled attempt) is counted on one row per
// client address, minute and kind, so a flood is a row a minute.
func (c *Console) audit(r *http.Request, who, action, target, outcome string, status int, detail string) {
	if c.cfg.Audit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), audit.WriteTimeout)
	defer cancel()
	e := audit.Event{Actor: who, Via: "console", Action: action, Target: target, Outcome: outcome, Status: status, Detail: detail,
		ClientAddr: c.clientAddr(r)}
	var err error
	if who == "" && outcome == audit.Denied {
		_, err = c.cfg.Audit.CountAudit(ctx, e)
	} else {
		err = c.cfg.Audit.RecordAudit(ctx, e)
	}
	if err != nil {
		c.logger.Error("audit row not recorded", "action", action, "actor", who, "err", err)
	}
}

// adminToken returns the user of an admin token.
func (c *Console) adminToken(token string) (string, bool) {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	user, found := "", false
	for k, u := range c.tokens {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			user, found = u, true
		}
	}
	return user, found
}

// sessionKey is the Redis key of a session id; Redis holds only the id's hash, so reading
// Redis does not give away sessions.
func sessionKey(id string) string { return session.NewStore(nil, sessionPrefix, 0).Key(id) }

// newSession stores a session for the admin behind token and returns its cookie value.
func (c *Console) newSession(ctx context.Context, user, token string) (string, error) {
	id, err := c.sessions.Create(ctx, session.Data{User: user, Token: session.Fingerprint(token)})
	if err != nil {
		return "", fmt.Errorf("console session: %w", err)
	}
	return id, nil
}

// session returns a live session: known to Redis, younger than SessionTTL (whatever TTL
// it was stored with), opened with a token that is still an admin token.
func (c *Console) session(ctx context.Context, id string) (sessionData, bool) {
	s, ok, err := c.sessions.Get(ctx, id)
	if err != nil {
		c.logger.Warn("console session lookup failed", "err", err)
	}
	if !ok {
		return s, false
	}
	for sum := range c.tokens {
		if hex.EncodeToString(sum[:8]) == s.Token {
			return s, true
		}
	}
	return s, false
}

// clientAddr is where a request comes from: the peer, or behind the trusted proxies the
// client they name (auth.Gateway.ClientAddr, as everywhere else).
func (c *Console) clientAddr(r *http.Request) string { return c.cfg.Gateway.ClientAddr(r) }

// refuse answers a refused credential: 429 and the seconds to wait once the client address
// or the credential has used up its failures, else the refusal is counted (401). Either is
// audited.
func (c *Console) refuse(r *http.Request, credential string) (status, wait int) {
	addr := c.clientAddr(r)
	secs, err := c.throttle.Blocked(r.Context(), addr, credential)
	if err != nil {
		c.logger.Warn("console login throttle unavailable", "err", err)
	}
	if secs > 0 {
		c.audit(r, "", audit.ActionThrottled, "", audit.Denied, http.StatusTooManyRequests, "too many refused credentials from this address or with this credential")
		return http.StatusTooManyRequests, secs
	}
	if err := c.throttle.Failed(r.Context(), addr, credential); err != nil {
		c.logger.Warn("console login throttle unavailable", "err", err)
	}
	c.logger.Warn("console login failed", "client", addr)
	c.audit(r, "", audit.ActionSignIn, "", audit.Denied, http.StatusUnauthorized, "not an admin credential")
	return http.StatusUnauthorized, 0
}

// throttled answers 429 with the time left in the window that throttled the request.
func (c *Console) throttled(w http.ResponseWriter, r *http.Request, secs int) {
	secs = max(secs, 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, c.say(w, r, "login.throttled", map[string]string{"s": strconv.Itoa(secs)}), http.StatusTooManyRequests)
}

// say is the words for a message key, with its {name} values, in the visitor's language when
// the web page is on (LoginPage.ConsoleSay), else in English (plainProblems).
func (c *Console) say(w http.ResponseWriter, r *http.Request, key string, values map[string]string) string {
	if c.cfg.Page != nil {
		return c.cfg.Page.ConsoleSay(w, r, key, values)
	}
	out := plainProblems[key]
	for k, v := range values {
		out = strings.ReplaceAll(out, "{"+k+"}", v)
	}
	return out
}

var plainLoginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>taskcenter console</title><link rel="icon" href="data:,">
<style>body{font-family:sans-serif;max-width:26em;margin:4em auto}input{width:100%;padding:.5em;margin:.5em 0}p.err{color:#b00}</style>
</head><body><h1>taskcenter console</h1>
{{if .Error}}<p class="err">{{.Error}}</p>{{end}}
{{if .SSO}}<p><a id="sso" href="{{.SSO}}">Sign in with your company account</a></p>{{end}}
<form method="post" action="{{.Action}}"><label>Admin token<input type="password" name="token" autofocus required></label>
<input type="submit" value="Log in"></form></body></html>`))

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	data := loginData{Action: ConsolePath + "/login"}
	if c.cfg.Web != nil {
		data.SSO = c.cfg.Web.ConsoleSignInURL(ConsolePath + "/")
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		token := ""
		if err := r.ParseForm(); err == nil {
			token = r.PostForm.Get("token")
		}
		if user, ok := c.adminToken(token); ok {
			id, err := c.newSession(r.Context(), user, token)
			if err != nil {
				c.logger.Error("console login failed to store the session", "err", err)
				c.loginPage(w, r, http.StatusServiceUnavailable, data, "console.unavailable", nil)
				return
			}
			secure := r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: ConsolePath,
				MaxAge: int(c.cfg.SessionTTL / time.Second), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
			c.logger.Info("console login", "user", user, "client", c.clientAddr(r))
			c.audit(r, user, audit.ActionSignIn, "", audit.Success, http.StatusSeeOther, "")
			http.Redirect(w, r, ConsolePath+"/", http.StatusSeeOther)
			return
		}
		if status, wait := c.refuse(r, token); status == http.StatusTooManyRequests {
			wait = max(wait, 1)
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			c.loginPage(w, r, status, data, "login.throttled", map[string]string{"s": strconv.Itoa(wait)})
			return
		}
		c.loginPage(w, r, http.StatusUnauthorized, data, "console.not_admin", nil)
		return
	}
	c.loginPage(w, r, http.StatusOK, data, "", nil)
}

// loginPage writes the sign-in page: the web page's when there is one, else a plain one
// (English, problem's text from plainProblems).
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request, status int, data loginData, problem string, values map[string]string) {
	if c.cfg.Page != nil {
		c.cfg.Page.ConsoleLogin(w, r, status, data.Action, data.SSO, problem, values)
		return
	}
	data.Error = c.say(w, r, problem, values)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := plainLoginPage.Execute(w, data); err != nil {
		fmt.Fprintln(w, err)
	}
}

// loginData is what the sign-in page shows.
type loginData struct{ Action, Error, SSO string }

// plainProblems are the plain sign-in page's messages.
var plainProblems = map[string]string{
	"console.not_admin":       "That is not an admin token.",
	"console.no_task":         "No task {task}.",
	"console.task_unreadable": "The task cannot be read now; try again shortly.",
	"console.unavailable":     "The console cannot store sessions now (Redis unavailable); try again shortly.",
	"login.throttled":         "Too many refused credentials from your address or with this credential; try again in {s} s.",
}

// logout answers /monitor/logout. A GET shows a page with a sign-out button (asynqmon has
// none, so this is the console's way out, linked from the task page's nav and the sign-in
// page); the POST it sends ends the console session and the web page's session
// server-side, so the cookies are worthless even if kept, and then the provider's session
// when the web session came from it. A POST from another site is refused: nobody can sign
// an admin out from elsewhere.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.signOutPage(w, r)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "sign out with the button at "+ConsolePath+"/logout", http.StatusMethodNotAllowed)
		return
	}
	if c.origins.Check(r) != nil {
		c.audit(r, "", audit.ActionSignOut, "", audit.Denied, http.StatusForbidden, "a sign-out sent from another site")
		http.Error(w, "sign out with the button at "+ConsolePath+"/logout", http.StatusForbidden)
		return
	}
	if ck, err := r.Cookie(sessionCookie); err == nil && ck.Value != "" {
		who, live := c.session(r.Context(), ck.Value)
		if err := c.sessions.Delete(r.Context(), ck.Value); err != nil {
			c.logger.Error("console logout could not end the session", "err", err)
			http.Error(w, "the session could not be ended (Redis unavailable); try again shortly", http.StatusServiceUnavailable)
			return
		}
		if live {
			c.audit(r, who.User, audit.ActionSignOut, "", audit.Success, http.StatusSeeOther, "")
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: ConsolePath, MaxAge: -1, HttpOnly: true})
	next := ConsolePath + "/login"
	if c.cfg.Web != nil {
		to, err := c.cfg.Web.ConsoleSignOut(w, r)
		if err != nil {
			http.Error(w, "the session could not be ended (Redis unavailable); try again shortly", http.StatusServiceUnavailable)
			return
		}
		if to != "" && !strings.HasPrefix(to, "/") && c.cfg.Page != nil {
			// The identity provider's sign-out, on its own site: the console's form-action
			// 'self' would block this form's redirect there, so a page of this site moves on.
			c.cfg.Page.Continue(w, r, to)
			return
		}
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

var plainSignOutPage = template.Must(template.New("signout").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>taskcenter console</title><link rel="icon" href="data:,">
<style>body{font-family:sans-serif;max-width:26em;margin:4em auto}</style>
</head><body><h1>Sign out of the console</h1>
<form method="post" action="{{.}}"><input type="submit" id="console-signout-submit" value="Sign out"></form></body></html>`))

// signOutPage writes the page with the sign-out button: the web page's when there is one,
// else a plain one.
func (c *Console) signOutPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Page != nil {
		c.cfg.Page.ConsoleSignOutPage(w, r, ConsolePath+"/logout")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := plainSignOutPage.Execute(w, ConsolePath+"/logout"); err != nil {
		fmt.Fprintln(w, err)
	}
}

// readOnlyMessage answers a refused console action.
const readOnlyMessage = "the console is read-only: change tasks through the task API " +
	"(POST /api/v1/tasks/{id}/cancel, POST /api/v1/tasks/{id}/retry), which keeps the task rows and the queue in step"

// serveConsole serves asynqmon to an admin. Reads pass through. Every request that would
// change a queue or a job goes through consoleAction, so that the console never
// contradicts the task rows (the database is the source of truth; a job changed only in
// Redis is undone or resumed by the runtime).
func (c *Console) serveConsole(w http.ResponseWriter, r *http.Request, who string) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || !strings.HasPrefix(r.URL.Path, ConsolePath+"/api/") {
		c.ui.ServeHTTP(w, r)
		return
	}
	if c.cfg.ReadOnly {
		c.audit(r, who, "console.refused", strings.TrimPrefix(r.URL.Path, ConsolePath+"/api/"), audit.Denied, http.StatusForbidden, "the console is read-only")
		http.Error(w, readOnlyMessage, http.StatusForbidden)
		return
	}
	a := parseConsoleAction(r.Method, strings.TrimPrefix(r.URL.Path, ConsolePath+"/api/"))
	// A cancel through the task store records its audit row with the change; every other
	// action (or its refusal) is recorded here.
	au := &audit.Origin{Actor: who, Via: "console", ClientAddr: c.clientAddr(r)}
	status, msg := c.act(audit.NewContext(r.Context(), au), a, who)
	if au.Recorded() == 0 {
		action, target := "console."+cmp.Or(a.verb, "refused"), cmp.Or(a.job, strings.TrimPrefix(r.URL.Path, ConsolePath+"/api/"))
		if no, ok := task.OfJob(a.job); ok {
			target = no
		}
		outcome := audit.Success
		switch {
		case status == http.StatusForbidden:
			outcome = audit.Denied
		case status >= 500:
			outcome = audit.Error
		case status >= 400:
			outcome = audit.Refused
		}
		c.audit(r, who, action, target, outcome, cmp.Or(status, http.StatusOK), msg)
	}
	if status == 0 {
		c.ui.ServeHTTP(w, r)
		return
	}
	if msg == "" {
		w.WriteHeader(status)
		return
	}
	http.Error(w, msg, status)
}

// consoleAction is a mutating asynqmon API request.
type consoleAction struct {
	verb  string // pause, resume, delete, archive, run, cancel; "bulk" or "" when refused
	state string // the job's asynq state: pending, scheduled, retry, active, archived, completed
	job   string // asynq job id
}

// parseConsoleAction reads an asynqmon API path (after /monitor/api/).
func parseConsoleAction(method, rest string) consoleAction {
	segs := strings.Split(rest, "/")
	if len(segs) < 2 || segs[0] != "queues" {
		return consoleAction{}
	}
	if len(segs) == 2 {
		if _, verb, ok := strings.Cut(segs[1], ":"); ok && method == http.MethodPost && (verb == "pause" || verb == "resume") {
			return consoleAction{verb: verb}
		}
		return consoleAction{} // deleting a queue
	}
	state, isTasks := strings.CutSuffix(segs[2], "_tasks")
	if !isTasks {
		if s, _, bulk := strings.Cut(segs[2], ":"); bulk && strings.HasSuffix(s, "_tasks") {
			return consoleAction{verb: "bulk"}
		}
		return consoleAction{} // groups, and anything this console does not know
	}
	if len(segs) != 4 {
		return consoleAction{}
	}
	job, verb, _ := strings.Cut(segs[3], ":")
	switch {
	case method == http.MethodDelete && verb == "":
		verb = "delete"
	case method == http.MethodPost && (verb == "archive" || verb == "run" || verb == "cancel"):
	default:
		return consoleAction{}
	}
	return consoleAction{verb: verb, state: state, job: job}
}

// act carries out a console action on the task row first. It returns status 0 when asynqmon
// should then do what was asked to the job, or the answer to give instead.
//
//   - delete or archive of a pending, scheduled or retry job cancels its task, then removes
//     the job (a task that is RUNNING meanwhile gets cancel requested, and its job stays to
//     bring it to CANCELLED);
//   - cancel of an active job requests the task's cancel: the worker stops at its next batch
//     and the task ends CANCELLED (asynq's own cancel would hand the task back to be
//     retried);
//   - run of a scheduled or retry job brings the task's retry forward, then runs the job;
//   - run of an archived job is refused: POST /api/v1/tasks/{id}/retry is the transition;
//   - delete of an archived or completed job changes no task and goes through;
//   - pause and resume of a queue go through;
//   - bulk actions and anything else are refused.
//
// Jobs that are not a task's (the cleanup job) go through unchanged.
func (c *Console) act(ctx context.Context, a consoleAction, who string) (int, string) {
	switch a.verb {
	case "pause", "resume":
		c.logger.Info("queue "+a.verb+"d from the console", "admin", who)
		return 0, ""
	case "bulk":
		return http.StatusForbidden, "bulk actions are off in this console: act on one job at a time, or use the task API " +
			"(POST /api/v1/tasks/{id}/cancel, POST /api/v1/tasks/{id}/retry) for many"
	case "":
		return http.StatusForbidden, "this console action is off: " + readOnlyMessage[len("the console is read-only: "):]
	}
	taskNo, isTask := task.OfJob(a.job)
	if !isTask {
		return 0, ""
	}
	actor := who + " from the console"
	switch {
	case (a.verb == "delete" || a.verb == "archive") && (a.state == "pending" || a.state == "scheduled" || a.state == "retry"):
		res, err := c.cfg.Tasks.CancelBy(ctx, taskNo, store.Scope{Admin: true}, actor)
		var conflict *store.ConflictError
		switch {
		case errors.Is(err, store.ErrNotFound), errors.As(err, &conflict):
			return 0, "" // a stale job: removing it changes no task
		case err != nil:
			return c.storeFailed(err, taskNo)
		case !res.Immediate:
			c.logger.Info("cancel requested from the console by "+who, "task_no", taskNo, "job", a.job, "action", a.verb)
			return http.StatusAccepted, "the task is running: its cancel was requested, and it stops at its next batch and ends CANCELLED"
		}
		c.logger.Info("cancelled from the console by "+who, "task_no", taskNo, "job", a.job, "action", a.verb)
		return 0, ""
	case a.verb == "cancel" && a.state == "active":
		res, err := c.cfg.Tasks.CancelBy(ctx, taskNo, store.Scope{Admin: true}, actor)
		var conflict *store.ConflictError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return 0, ""
		case errors.As(err, &conflict):
			return http.StatusConflict, fmt.Sprintf("the task is already %s", conflict.Status)
		case err != nil:
			return c.storeFailed(err, taskNo)
		case res.Immediate:
			c.logger.Info("cancelled from the console by "+who, "task_no", taskNo, "job", a.job, "action", a.verb)
		default:
			c.logger.Info("cancel requested from the console by "+who, "task_no", taskNo, "job", a.job, "action", a.verb)
		}
		return http.StatusNoContent, ""
	case a.verb == "run" && (a.state == "scheduled" || a.state == "retry"):
		_, err := c.cfg.Tasks.ExpediteRetry(ctx, taskNo, actor)
		var conflict *store.ConflictError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return 0, ""
		case errors.As(err, &conflict) && conflict.Status == store.StatusPending:
			return 0, "" // the job only delivers a waiting task early
		case errors.As(err, &conflict):
			return http.StatusConflict, fmt.Sprintf("the task is %s: there is no retry to run now", conflict.Status)
		case err != nil:
			return c.storeFailed(err, taskNo)
		}
		c.logger.Info("retry run now from the console by "+who, "task_no", taskNo, "job", a.job)
		return 0, ""
	case a.verb == "run" && a.state == "archived":
		return http.StatusForbidden, "an archived job's task has ended (or taskcenter delivers it again itself); " +
			"to run the task again use POST /api/v1/tasks/" + taskNo + "/retry"
	case a.verb == "delete" && (a.state == "archived" || a.state == "completed"):
		return 0, ""
	default:
		return http.StatusForbidden, fmt.Sprintf("%s of a %s job is off in this console; use the task API", a.verb, a.state)
	}
}

func (c *Console) storeFailed(err error, taskNo string) (int, string) {
	c.logger.Error("console action failed", "task_no", taskNo, "err", err)
	return http.StatusServiceUnavailable, "the task database could not be updated; nothing was changed, try again shortly"
}
