package monitor

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
)

// ConsolePath is where the console is mounted. asynqmon is given it as its RootPath, so its
// links, assets and API calls carry the prefix; no StripPrefix is involved.
const ConsolePath = "/monitor"

// ConsoleConfig configures the console.
type ConsoleConfig struct {
	// Username and Password enable HTTP basic auth; empty Password disables it.
	Username, Password string
	// ReadOnly hides every action that changes queues.
	ReadOnly bool
	// AdminTokens are the API admin tokens; one of them, entered at /monitor/login, opens a
	// session (a signed cookie), and a Bearer admin token works for scripts.
	AdminTokens []string
	// SessionTTL is how long a login lasts.
	SessionTTL time.Duration
}

// Console is asynqmon behind admin-only authentication.
type Console struct {
	cfg    ConsoleConfig
	mon    *asynqmon.HTTPHandler
	key    []byte
	tokens [][32]byte
}

// NewConsole builds the console; it opens its own Redis pools (closed by Close).
func NewConsole(redis asynq.RedisConnOpt, cfg ConsoleConfig) *Console {
	c := &Console{cfg: cfg, mon: asynqmon.New(asynqmon.Options{RootPath: ConsolePath, RedisConnOpt: redis, ReadOnly: cfg.ReadOnly})}
	// The session key is derived from the admin tokens: every replica with the same config
	// accepts the same sessions, and rotating the tokens ends them.
	sorted := slices.Clone(cfg.AdminTokens)
	slices.Sort(sorted)
	sum := sha256.Sum256([]byte("taskcenter-console\x00" + strings.Join(sorted, "\x00")))
	c.key = sum[:]
	for _, t := range cfg.AdminTokens {
		c.tokens = append(c.tokens, sha256.Sum256([]byte(t)))
	}
	return c
}

// Close closes asynqmon's Redis pools.
func (c *Console) Close() error { return c.mon.Close() }

const sessionCookie = "taskcenter_console"

// Handler serves the login page and, to admins only, asynqmon.
func (c *Console) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case ConsolePath + "/login":
			c.login(w, r)
			return
		case ConsolePath + "/logout":
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: ConsolePath, MaxAge: -1, HttpOnly: true})
			http.Redirect(w, r, ConsolePath+"/login", http.StatusSeeOther)
			return
		}
		if !c.authorized(r) {
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
		w.Header().Set("Cache-Control", "no-store")
		c.mon.ServeHTTP(w, r)
	})
}

// authorized accepts basic auth, a Bearer admin token, or a valid session cookie.
func (c *Console) authorized(r *http.Request) bool {
	if u, p, ok := r.BasicAuth(); ok && c.cfg.Password != "" {
		return subtle.ConstantTimeCompare([]byte(u), []byte(c.cfg.Username)) == 1 &&
			subtle.ConstantTimeCompare([]byte(p), []byte(c.cfg.Password)) == 1
	}
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return c.isAdminToken(token)
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		return c.validSession(ck.Value)
	}
	return false
}

func (c *Console) isAdminToken(token string) bool {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	ok := false
	for _, t := range c.tokens {
		ok = ok || subtle.ConstantTimeCompare(t[:], sum[:]) == 1
	}
	return ok
}

func (c *Console) sign(payload string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (c *Console) validSession(v string) bool {
	payload, sig, ok := strings.Cut(v, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(c.sign(payload))) {
		return false
	}
	exp, err := strconv.ParseInt(payload, 10, 64)
	return err == nil && time.Now().Unix() < exp
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>taskcenter console</title>
<style>body{font-family:sans-serif;max-width:26em;margin:4em auto}input{width:100%;padding:.5em;margin:.5em 0}p.err{color:#b00}</style>
</head><body><h1>taskcenter console</h1>
{{if .Error}}<p class="err">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}"><label>Admin token<input type="password" name="token" autofocus required></label>
<input type="submit" value="Log in"></form></body></html>`))

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	data := struct{ Action, Error string }{Action: ConsolePath + "/login"}
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err == nil && c.isAdminToken(r.PostForm.Get("token")) {
			exp := time.Now().Add(c.cfg.SessionTTL).Unix()
			payload := strconv.FormatInt(exp, 10)
			secure := r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: payload + "." + c.sign(payload), Path: ConsolePath,
				Expires: time.Unix(exp, 0), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, ConsolePath+"/", http.StatusSeeOther)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		data.Error = "That is not an admin token."
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := loginPage.Execute(w, data); err != nil {
		fmt.Fprintln(w, err)
	}
}
