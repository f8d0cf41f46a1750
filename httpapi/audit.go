package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
)

// This file is the API side of the audit trail and of scope enforcement.
//
// Every route that changes something, and every download, has an audit action. The store's
// transitions (submit, cancel, retry) and token functions write their row in the same
// statement as the change, from the audit.Origin that authenticated puts in the request's
// context; every other outcome — a refusal (401, 403, 404, 409, 422 …), a download, a change
// whose statement does not write its own row (schedules, webhooks) — is written here once the
// answer is known. So each such request leaves exactly one row, and a refused one only the
// refusal; a bulk cancel or retry leaves one per task it names, as if each had been its own
// request (bulk.go). Each row also goes to the log (auth.audit.log). Admins read the trail
// through httpapi/identity (ListAudit).

// routeScope is the scope a route needs: reading needs tasks:read, anything else
// tasks:write, and the admin routes admin.
func routeScope(pattern string) string {
	method, _, _ := strings.Cut(pattern, " ")
	switch {
	case adminRoute(pattern):
		return auth.ScopeAdmin
	case method == http.MethodGet || method == http.MethodHead:
		return auth.ScopeRead
	default:
		return auth.ScopeWrite
	}
}

// adminRoute reports whether only admins may use a route at all.
func adminRoute(pattern string) bool { return pattern == "GET /api/v1/audit" }

// checkScope refuses a principal that lacks the route's scope: 403 insufficient_scope naming
// it, or 403 forbidden for a user on an admin route.
func checkScope(p identity.Principal, pattern, scope string) error {
	if scope == auth.ScopeAdmin && p.Role != config.RoleAdmin {
		return problem.New(http.StatusForbidden, "forbidden", "only an admin may use "+pattern)
	}
	if !p.Has(scope) {
		return problem.New(http.StatusForbidden, "insufficient_scope",
			fmt.Sprintf("this token lacks the %s scope, which %s needs; create a token with it (POST /api/v1/tokens)", scope, pattern))
	}
	return nil
}

// auditAction is the audit action of a route, "" for a read that is not audited. A route
// this table does not name but that changes something is audited under its pattern.
func auditAction(pattern string) string {
	actions := map[string]string{
		"POST /api/v1/exports":                                       audit.ActionTaskSubmit,
		"POST /api/v1/imports":                                       audit.ActionTaskSubmit,
		"POST /api/v1/tasks":                                         audit.ActionTaskSubmit,
		"POST /api/v1/tasks:batch":                                   audit.ActionTaskSubmit,
		"POST /api/v1/tasks/{id}/cancel":                             audit.ActionTaskCancel,
		"POST /api/v1/tasks/{id}/retry":                              audit.ActionTaskRetry,
		"POST /api/v1/tasks/{id}/undo":                               "task.undo",            // on the import; the undo task's own submit row is not written
		"POST /api/v1/tasks/cancel":                                  audit.ActionTaskCancel, // a row per task (bulk.go)
		"POST /api/v1/tasks/retry":                                   audit.ActionTaskRetry,
		"GET /api/v1/tasks/{id}/result":                              "task.download_result",
		"GET /api/v1/tasks/{id}/error-report":                        "task.download_error_report",
		"GET /api/v1/tasks/{id}/logs.txt":                            "task.download_log",
		"POST /api/v1/schedules":                                     "schedule.create",
		"POST /api/v1/schedules/{id}/pause":                          "schedule.pause",
		"POST /api/v1/schedules/{id}/resume":                         "schedule.resume",
		"DELETE /api/v1/schedules/{id}":                              "schedule.delete",
		"POST /api/v1/webhooks":                                      "webhook.create",
		"DELETE /api/v1/webhooks/{id}":                               "webhook.delete",
		"POST /api/v1/webhooks/{id}/deliveries/{delivery}/redeliver": "webhook.redeliver",
		"POST /api/v1/tokens":                                        audit.ActionTokenCreate,
		"DELETE /api/v1/tokens/{id}":                                 audit.ActionTokenRevoke,
	}
	if a, ok := actions[pattern]; ok {
		return a
	}
	if method, _, _ := strings.Cut(pattern, " "); method != http.MethodGet && method != http.MethodHead {
		return pattern
	}
	return ""
}

// auditRefusal records a request refused before its handler ran, on any route. A refusal of
// nobody — no credential, a refused one (401), a throttled attempt (429) — is counted on one
// row per client address, minute and kind (identity.CountRefusal), so a flood is a row a
// minute. A refusal of somebody — a missing scope, a cross-site change (403) — has its own
// row, under the route's audit action, or for a read its pattern ("GET /api/v1/tasks").
func (s *Server) auditRefusal(w http.ResponseWriter, r *http.Request, pattern, action string, p identity.Principal, pr *problem.Problem) {
	switch {
	case p.User == "" && (pr.Status == http.StatusUnauthorized || pr.Status == http.StatusTooManyRequests):
		s.id.CountRefusal(r, pattern, pr)
		return
	case pr.Status == http.StatusUnauthorized || pr.Status == http.StatusForbidden || pr.Status == http.StatusTooManyRequests:
		action = cmp.Or(action, pattern)
	}
	s.auditAnswer(w, r, action, p, nil, pr.Status, pr)
}

// auditAnswer records the audit row of an answered request to an audited route, unless the
// store already wrote it with the change (a is the request's audit; nil before one existed).
func (s *Server) auditAnswer(w http.ResponseWriter, r *http.Request, action string, p identity.Principal, a *audit.Origin, status int, pr *problem.Problem) {
	if action == "" {
		return
	}
	target := auditTarget(r)
	if target == "" && pr == nil {
		target = locationTarget(w.Header().Get("Location"))
	}
	e := s.auditEvent(r, action, target, p, status, pr)
	if pr == nil && a.Recorded() > 0 {
		// Written with the change itself; the log still hears of it.
		s.id.LogAudit(r.Context(), e, a.Recorded())
		return
	}
	s.id.Record(r.Context(), e)
}

// auditEvent is the audit row of p's request r acting on target, answered status (with the
// problem pr, or nil).
func (s *Server) auditEvent(r *http.Request, action, target string, p identity.Principal, status int, pr *problem.Problem) audit.Event {
	e := audit.Event{Actor: p.User, Via: p.Via, Action: action, Target: target, Outcome: identity.OutcomeOf(status), Status: status,
		ClientAddr: s.id.ClientAddr(r), RequestID: problem.RequestID(r.Context())}
	if pr != nil {
		e.Detail = truncate(pr.Code+": "+pr.Detail, 500)
	}
	return e
}

// auditTarget is the object a request acted on: the {id} in its path, or what a create
// answered in Location.
func auditTarget(r *http.Request) string {
	id := r.PathValue("id")
	if _, bad := textcheck.Problem(id, request.MaxID); bad {
		return ""
	}
	return id
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// ActorView says who did something to a task, and when ("cancelled by alice at …").
type ActorView struct {
	Actor string    `json:"actor"`
	At    time.Time `json:"at"`
}

// cancelledBy is who cancelled (or asked to cancel) a task, from the audit trail; nil when
// nobody did or the trail cannot be read now.
func (s *Server) cancelledBy(ctx context.Context, t *store.Task) *ActorView {
	if !t.CancelRequested && t.Status != store.StatusCancelled {
		return nil
	}
	e, err := s.Store.LastAudit(ctx, t.TaskNo, audit.ActionTaskCancel)
	if err != nil || e == nil {
		return nil
	}
	who := e.Actor
	if e.Via == "console" {
		who += " (console)"
	}
	return &ActorView{Actor: who, At: e.At.UTC()}
}

// locationTarget is the id at the end of a Location header.
func locationTarget(loc string) string {
	if loc == "" {
		return ""
	}
	return path.Base(loc)
}
