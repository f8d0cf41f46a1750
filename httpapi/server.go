// Package httpapi is taskcenter's REST API: submit, list, inspect, cancel, retry and
// download, behind bearer tokens, with problem+json errors. It also assembles the one
// http.Handler the API address serves (Server.Handler): the API's routes, the web page's,
// the operational endpoints and cmd's mounts, under one middleware.
//
// The HTTP server is built of rooms. An arrow reads "imports"; none points back up:
//
//	httpapi                 REST handlers, the route table (scopes, audit actions), the
//	 │                      error table, the OpenAPI document, the middleware, the wiring
//	 ├─→ httpapi/web        the end-user page at / and its sign-in (token, identity provider)
//	 ├─→ httpapi/live       live task events: the hub and the SSE streams it feeds
//	 ├─→ httpapi/automation what acts without a person: webhook subscriptions and their
//	 │                      deliveries, a submit's notify_url, users' schedules
//	 ├─→ httpapi/identity   who is calling (Principal), cookie sessions, CSRF, API tokens,
//	 │                      the audit trail's writer and listing, the console's view of a
//	 │                      web sign-in
//	 ├─→ httpapi/request    reading a request: the body's pace, strict JSON, parameters
//	 └─→ httpapi/problem    problem+json answers, field errors, the request id
//
// web, live and automation use identity, request and problem; identity uses request and
// problem; request uses problem. New builds the rooms from Deps; cmd/taskcenter hands the
// identity service (Server.Identity) to the console and the profiling endpoints.
package httpapi

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/httpapi/automation"
	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/live"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/httpapi/web"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
)

// Deps are the API's collaborators.
type Deps struct {
	// Types are the task types this deployment knows: the generic submit, GET /api/v1/types
	// and the schedules (httpapi/automation) read them (no per-type code in this package).
	Types *jobs.Registry
	// Uploads is the import's submit side (where uploads go, their checks, their key).
	Uploads   *importer.Uploads
	Store     *store.Store
	Submitter *jobs.Submitter
	Board     *jobs.ProgressBoard
	// Files is where results and error reports are kept: downloads redirect to a presigned
	// URL when it gives one, else stream from it.
	Files  storage.Store
	Tokens config.Tokens
	// Ready reports each dependency's health for /readyz; nil values mean healthy.
	Ready  func(ctx context.Context) map[string]error
	Logger *slog.Logger
	// QueryTimeout bounds each request's database work. Default 5s.
	QueryTimeout time.Duration
	// Import bounds uploads.
	Import ImportLimits
	// Body bounds how slowly request bodies may arrive (every route, uploads included).
	Body request.BodyLimits
	// Observe, when set, is called after every request with its route pattern, status and
	// duration (metrics).
	Observe func(route string, status int, took time.Duration)
	// Postgres, IdentityProvider and ObjectStore, when set, follow each dependency's
	// availability (internal/outage's Trackers): a 503 during a reported outage of one is
	// counted by its tracker instead of logged on its own. Postgres's failures are counted
	// here; the identity provider's and the object store's by their clients (auth.Provider,
	// the s3 backend), which report every call.
	Postgres         jobs.Dependency
	IdentityProvider jobs.Dependency
	ObjectStore      jobs.Dependency
	// Webhooks checks webhook URLs and secrets, a subscription's or a submit's notify_url
	// (webhooks.allowed_hosts). Nil allows no URL.
	Webhooks *webhook.Policy
	// Redis, when set, carries the live event streams (one subscription per process) and the
	// web page's sessions. Without it both are off and the API answers polls only.
	Redis redis.UniversalClient
	// Events tunes the live event streams (httpapi/live).
	Events live.Limits
	// Web configures the end-user web page at / (httpapi/web) and its sessions.
	Web WebConfig
	// Auth adds the ways in besides the config tokens, and tunes the audit trail.
	Auth AuthDeps
	// Schedules bounds users' schedules (how often, how many). Zero: the config defaults.
	Schedules config.Schedules
}

// AuthDeps are the company identity provider, the trusted gateway, the API token bounds and
// the audit trail's settings. The zero value is the one-box set-up: config tokens and API
// tokens only.
type AuthDeps struct {
	// OIDC verifies bearer JWTs and, with a client id, signs browsers in. Nil: off.
	OIDC *auth.Provider
	// Gateway believes a gateway's user header from its proxies, and reads client addresses
	// through them. Nil: off.
	Gateway *auth.Gateway
	// TokenDefaultTTL is an API token's lifetime when none is asked for. Default 90 days.
	TokenDefaultTTL time.Duration
	// TokenMaxTTL caps an API token's lifetime. Default 365 days.
	TokenMaxTTL time.Duration
	// AuditLog also writes every audit row to the log (message "audit").
	AuditLog bool
	// Throttle bounds refused bearer credentials on /api/*, per client address and per
	// credential, in Deps.Redis (none without it); past the limit they answer 429
	// too_many_failures. Zero: the config defaults (10 per 1m).
	Throttle config.Throttle
}

// WebConfig configures the web page and its sessions.
type WebConfig struct {
	// Disabled turns the page (and cookie sessions) off; the API is unchanged. The page also
	// needs Deps.Redis. Default on.
	Disabled bool
	// SessionTTL is how long a sign-in lasts at most. Default 12h.
	SessionTTL time.Duration
	// LoginFailures is how many refused sign-ins one client address, and one credential from
	// any address, may make per LoginWindow; further refused ones answer 429 until the window
	// ends (a valid credential always passes). Default 5.
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

// Mount is an extra handler served under the API's middleware (request ids, logging):
// the console and metrics are mounted by cmd.
type Mount struct {
	Pattern string
	Handler http.Handler
}

// Server serves the API.
type Server struct {
	Deps
	id         *identity.Service   // who is calling, sessions, the audit trail
	automation *automation.Service // webhooks, a submit's notify_url, schedules
	uploads    *uploadSlots
	hub        *live.Hub // live event streams; nil without Redis
	web        *web.App  // the web page; nil when off
}

// New returns the API server.
func New(d Deps) *Server {
	def := config.Default()
	if d.QueryTimeout <= 0 {
		d.QueryTimeout = def.Database.QueryTimeout
	}
	if d.Import.MaxConcurrentUploads <= 0 {
		d.Import.MaxConcurrentUploads = def.Import.MaxConcurrentUploads
	}
	d.Body = d.Body.WithDefaults()
	s := &Server{Deps: d, uploads: newUploadSlots(d.Import.MaxConcurrentUploads)}
	sessions := d.Redis // the web page's sessions live with it
	if d.Web.Disabled {
		sessions = nil
	}
	s.id = identity.New(identity.Config{Tokens: d.Tokens, Store: d.Store, OIDC: d.Auth.OIDC, Gateway: d.Auth.Gateway,
		AuditLog: d.Auth.AuditLog, Logger: d.Logger, QueryTimeout: d.QueryTimeout, TokenDefaultTTL: d.Auth.TokenDefaultTTL, TokenMaxTTL: d.Auth.TokenMaxTTL,
		Sessions: sessions, SessionTTL: d.Web.SessionTTL, SessionKey: d.Web.SessionKey,
		BearerThrottle: identity.BearerThrottle{Redis: d.Redis, Failures: d.Auth.Throttle.Failures, Window: d.Auth.Throttle.Window}})
	s.automation = automation.New(automation.Config{Store: d.Store, Types: d.Types, Submitter: d.Submitter, Schedules: d.Schedules, Webhooks: d.Webhooks})
	if d.Redis != nil {
		s.hub = live.NewHub(d.Redis, d.Store, d.Events, d.Logger)
		if !d.Web.Disabled {
			w, err := web.New(web.Config{Identity: s.id, Redis: d.Redis, OIDC: d.Auth.OIDC, Logger: d.Logger, WriteError: s.writeError,
				LoginFailures: d.Web.LoginFailures, LoginWindow: d.Web.LoginWindow, ConsoleLink: d.Web.ConsoleLink})
			if err != nil {
				panic("httpapi: the embedded web page is broken: " + err.Error()) // caught by every test
			}
			s.web = w
		}
	}
	return s
}

// Close ends every live event stream and the process's Redis subscription; call it when
// the HTTP server shuts down (streams are long requests that a drain would wait for).
func (s *Server) Close() {
	if s.hub != nil {
		s.hub.Close()
	}
}

// route is one authenticated API endpoint.
type route struct {
	pattern string
	handle  func(*Server, http.ResponseWriter, *http.Request, identity.Principal) error
	// upload routes read a long body: they bound their own database work instead of running
	// under the query timeout.
	upload bool
}

// apiRoutes is the API's route table. The OpenAPI test checks each is documented.
func apiRoutes() []route {
	return []route{
		{"POST /api/v1/exports", (*Server).submitExport, false},
		{"POST /api/v1/imports", (*Server).submitImport, true},
		{"GET /api/v1/imports/template", (*Server).importTemplate, false},
		{"GET /api/v1/tasks", routeOf(taskRoutes.listTasks), false},
		{"POST /api/v1/tasks", (*Server).submitTask, false},
		{"GET /api/v1/types", routeOf(typeRoutes.listTypes), false},
		{"GET /api/v1/messages", (*Server).listMessages, false},
		{"POST /api/v1/tasks:batch", (*Server).submitBatch, false},
		{"POST /api/v1/schedules", automationRoute((*automation.Service).CreateSchedule), false},
		{"GET /api/v1/schedules", automationRoute((*automation.Service).ListSchedules), false},
		{"GET /api/v1/schedules/{id}", automationRoute((*automation.Service).GetSchedule), false},
		{"POST /api/v1/schedules/{id}/pause", automationRoute((*automation.Service).PauseSchedule), false},
		{"POST /api/v1/schedules/{id}/resume", automationRoute((*automation.Service).ResumeSchedule), false},
		{"DELETE /api/v1/schedules/{id}", automationRoute((*automation.Service).DeleteSchedule), false},
		{"GET /api/v1/stats", routeOf(statsRoutes.stats), false},
		{"GET /api/v1/tasks/{id}", routeOf(taskRoutes.getTask), false},
		{"POST /api/v1/tasks/{id}/cancel", routeOf(taskRoutes.cancelTask), false},
		{"POST /api/v1/tasks/{id}/retry", routeOf(taskRoutes.retryTask), false},
		{"POST /api/v1/tasks/{id}/undo", routeOf(taskRoutes.undoTask), false},
		{"POST /api/v1/tasks/cancel", routeOf(taskRoutes.cancelTasks), false},
		{"POST /api/v1/tasks/retry", routeOf(taskRoutes.retryTasks), false},
		{"GET /api/v1/tasks/{id}/result", routeOf(taskRoutes.downloadResult), false},
		{"GET /api/v1/tasks/{id}/error-report", (*Server).downloadErrorReport, false},
		{"GET /api/v1/tasks/{id}/logs", routeOf(taskRoutes.listLogs), false},
		{"GET /api/v1/tasks/{id}/logs.txt", routeOf(taskRoutes.downloadLog), false},
		{"POST /api/v1/webhooks", automationRoute((*automation.Service).CreateWebhook), false},
		{"GET /api/v1/webhooks", automationRoute((*automation.Service).ListWebhooks), false},
		{"GET /api/v1/webhooks/{id}", automationRoute((*automation.Service).GetWebhook), false},
		{"DELETE /api/v1/webhooks/{id}", automationRoute((*automation.Service).DeleteWebhook), false},
		{"GET /api/v1/webhooks/{id}/deliveries", automationRoute((*automation.Service).ListDeliveries), false},
		{"POST /api/v1/webhooks/{id}/deliveries/{delivery}/redeliver", automationRoute((*automation.Service).Redeliver), false},
		// Streams are long: like uploads they run without the query timeout (httpapi/live).
		{"GET /api/v1/tasks/{id}/events", routeOf(eventRoutes.taskEvents), true},
		{"GET /api/v1/events", routeOf(eventRoutes.scopeEvents), true},
		// API tokens and the audit trail are httpapi/identity's, which checks the tokens too.
		{"POST /api/v1/tokens", identityRoute((*identity.Service).CreateToken), false},
		{"GET /api/v1/tokens", identityRoute((*identity.Service).ListTokens), false},
		{"DELETE /api/v1/tokens/{id}", identityRoute((*identity.Service).RevokeToken), false},
		{"GET /api/v1/audit", identityRoute((*identity.Service).ListAudit), false},
	}
}

// routeOf adapts a handler of a resource's small type over the server (taskRoutes,
// eventRoutes, …) to the route table.
func routeOf[T ~struct{ *Server }](h func(T, http.ResponseWriter, *http.Request, identity.Principal) error) func(*Server, http.ResponseWriter, *http.Request, identity.Principal) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request, p identity.Principal) error {
		return h(T{s}, w, r, p)
	}
}

// identityRoute adapts a handler of httpapi/identity (the API tokens', the audit trail's) to
// the route table.
func identityRoute(h func(*identity.Service, http.ResponseWriter, *http.Request, identity.Principal) error) func(*Server, http.ResponseWriter, *http.Request, identity.Principal) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request, p identity.Principal) error {
		return h(s.id, w, r, p)
	}
}

// automationRoute adapts a handler of httpapi/automation (webhooks, schedules) to the route
// table.
func automationRoute(h func(*automation.Service, http.ResponseWriter, *http.Request, identity.Principal) error) func(*Server, http.ResponseWriter, *http.Request, identity.Principal) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request, p identity.Principal) error {
		return h(s.automation, w, r, p)
	}
}

// Routes lists every method and path pattern the server answers, API and operational.
func Routes() []string {
	out := []string{"GET /healthz", "GET /readyz", "GET /openapi.yaml"}
	for _, r := range apiRoutes() {
		out = append(out, r.pattern)
	}
	return out
}

// Handler returns the routed API with its middleware, plus the extra mounts.
func (s *Server) Handler(mounts ...Mount) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range apiRoutes() {
		timeout := s.QueryTimeout
		if rt.upload {
			timeout = 0
		}
		handle := rt.handle
		mux.Handle(rt.pattern, s.authenticated(rt.pattern, func(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
			return handle(s, w, r, p)
		}, timeout))
	}
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /openapi.yaml", serveOpenAPI)
	if s.web != nil {
		s.web.Mount(mux)
	}
	for _, m := range mounts {
		mux.Handle(m.Pattern, m.Handler)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.writeError(w, r, problem.New(http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, " or "))))
			return
		}
		s.writeError(w, r, problem.New(http.StatusNotFound, "no_route", "no such endpoint: "+r.Method+" "+textcheck.Echo(r.URL.Path)))
	})
	return s.middleware(mux)
}

// allowedMethods lists the methods mux serves on r's path (other than through the
// catch-all), for a 405's Allow header.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

// authenticated identifies the caller (httpapi/identity), checks the scope the route needs
// (routeScope), then runs h within timeout (none when 0), turning its error into a problem.
// Every refusal of the caller, on every route, leaves an audit row (auditRefusal), and
// nothing else for it; every state-changing route and every download leaves one too
// (audit.go): written by the store with the change itself when there is one, else here once
// the answer is known.
func (s *Server) authenticated(pattern string, h func(http.ResponseWriter, *http.Request, identity.Principal) error, timeout time.Duration) http.Handler {
	scope, action := routeScope(pattern), auditAction(pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.id.Principal(r)
		if err == nil {
			err = checkScope(p, pattern, scope)
		}
		if err != nil {
			pr := toProblem(err)
			switch {
			case pr.Status == http.StatusUnauthorized:
				w.Header().Set("WWW-Authenticate", `Bearer realm="taskcenter"`)
			case pr.Code == "insufficient_scope":
				w.Header().Set("WWW-Authenticate", `Bearer realm="taskcenter", error="insufficient_scope", scope="`+scope+`"`)
			}
			s.writeError(w, r, err)
			s.auditRefusal(w, r, pattern, action, p, pr)
			return
		}
		a := &audit.Origin{Actor: p.User, Via: p.Via, ClientAddr: s.id.ClientAddr(r), RequestID: problem.RequestID(r.Context())}
		r = r.WithContext(audit.NewContext(r.Context(), a))
		if timeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		err = h(w, r, p)
		var pr *problem.Problem
		if err != nil {
			pr = toProblem(err)
			s.writeError(w, r, err)
		}
		status := http.StatusOK
		if rec, ok := w.(*statusRecorder); ok && rec.status != 0 {
			status = rec.status
		} else if pr != nil {
			status = pr.Status
		}
		s.auditAnswer(w, r, action, p, a, status, pr)
	})
}

// Identity is the server's identity service: how callers are found, the web page's
// sessions, and the console's view of them (monitor's WebSignIn; cmd wires it).
func (s *Server) Identity() *identity.Service { return s.id }

// ConsoleLoginPage is the web page's rendering of the console's sign-in (monitor's
// LoginPage), or nil when the web page is off.
func (s *Server) ConsoleLoginPage() monitorLoginPage {
	if s.web == nil {
		return nil
	}
	return s.web
}

// monitorLoginPage is monitor.LoginPage, named here so that httpapi need not import monitor.
type monitorLoginPage interface {
	ConsoleLogin(w http.ResponseWriter, r *http.Request, status int, action, ssoURL, problem string, values map[string]string)
	ConsoleSignOutPage(w http.ResponseWriter, r *http.Request, action string)
	Continue(w http.ResponseWriter, r *http.Request, target string)
	ConsoleSay(w http.ResponseWriter, r *http.Request, key string, values map[string]string) string
}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// statusRecorder remembers the status a handler wrote. An answer sent before the request
// body was read to its end closes the connection: otherwise the server would first drain
// up to 256 KiB of the body, at whatever pace the client sends it.
type statusRecorder struct {
	http.ResponseWriter
	status int
	body   *request.GuardedBody
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
		if r.body != nil && !r.body.Done() {
			r.Header().Set("Connection", "close")
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// middleware assigns the request id, recovers panics, and logs and measures each request.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-ID")
		if !validRequestID.MatchString(id) {
			id = "req_" + strings.ToLower(rand.Text()[:16])
		}
		w.Header().Set("X-Request-ID", id)
		// Every answer is exactly the type it declares: no browser sniffs a JSON body or a
		// download into HTML.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		r = r.WithContext(problem.WithRequestID(r.Context(), id))
		rec := &statusRecorder{ResponseWriter: w}
		body := request.GuardBody(rec, r, s.Body)
		rec.body = body
		defer func() {
			if body != nil {
				body.Finish()
			}
			if p := recover(); p != nil {
				s.Logger.Error("handler panicked", "request_id", id, "panic", p)
				if rec.status == 0 {
					s.writeError(rec, r, problem.New(http.StatusInternalServerError, "internal", "an internal error occurred; quote the request id when reporting it"))
				}
			}
			took := time.Since(start)
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			if s.Observe != nil {
				s.Observe(route, rec.status, took)
			}
			s.Logger.LogAttrs(r.Context(), slog.LevelInfo, "http request", slog.String("request_id", id),
				slog.String("method", r.Method), slog.String("route", route), slog.Int("status", rec.status),
				slog.Duration("took", took))
		}()
		next.ServeHTTP(rec, r)
	})
}
