package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/noop"
	"github.com/taskcenter/taskcenter/store"
)

// exportRequest is the body of POST /api/v1/exports.
type exportRequest struct {
	// Type is "customers" or "tasks" (the task type without its "export:" prefix also works).
	Type   string          `json:"type"`
	Filter json.RawMessage `json:"filter"`
	// NotifyURL is told when the task ends (a signed webhook); NotifySecret signs it.
	NotifyURL    string `json:"notify_url"`
	NotifySecret string `json:"notify_secret"`
}

// SubmitView is a submit's answer: the task, and whether it already existed.
type SubmitView struct {
	Task      TaskView `json:"task"`
	Duplicate bool     `json:"duplicate"`
	// Webhook is the subscription a notify_url made; its secret is shown only here.
	Webhook *WebhookView `json:"webhook,omitempty"`
}

// submitExport answers POST /api/v1/exports. With an Idempotency-Key header, repeating the
// request returns the first task (200, duplicate true) instead of creating another.
func (s *Server) submitExport(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req exportRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	taskType := req.Type
	if !strings.Contains(taskType, ":") {
		taskType = "export:" + taskType
	}
	var params any
	switch taskType {
	case export.CustomersType:
		var f export.CustomerFilter
		if err := decodeFilter(req.Filter, &f); err != nil {
			return err
		}
		if err := f.Validate(); err != nil {
			return err
		}
		params = export.CustomerParams{Filter: f}
	case export.TasksType:
		var f export.TaskFilter
		if err := decodeFilter(req.Filter, &f); err != nil {
			return err
		}
		if err := f.Validate(); err != nil {
			return err
		}
		if f.Owner != "" && !p.Scope().Admin && f.Owner != p.User {
			return problem(http.StatusForbidden, "forbidden", "only an admin can export other users' tasks")
		}
		scope := p.Scope()
		if !scope.Admin {
			scope = store.Scope{Owner: p.User}
		}
		params = export.TaskParams{Filter: f, Scope: scope}
	default:
		return problem(http.StatusUnprocessableEntity, "unknown_type", fmt.Sprintf("type %s is not an export; use customers or tasks", echo(req.Type)))
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	return s.submit(w, r, jobs.Submission{Type: taskType, Owner: p.User, BizKey: idempotencyBizKey(key), Params: raw, RequestID: requestID(r.Context())},
		notifyOf(req.NotifyURL, req.NotifySecret))
}

// genericTypes may be submitted through POST /api/v1/tasks with JSON parameters. Only the
// bench type is, and only when the config enables it (a disabled type answers 422).
var genericTypes = map[string]bool{noop.Type: true}

// submitTask answers POST /api/v1/tasks {type, params}: a task of a type without its own
// submit endpoint.
func (s *Server) submitTask(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req struct {
		Type         string          `json:"type"`
		Params       json.RawMessage `json:"params"`
		NotifyURL    string          `json:"notify_url"`
		NotifySecret string          `json:"notify_secret"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if !genericTypes[req.Type] {
		return problem(http.StatusUnprocessableEntity, "unknown_type",
			fmt.Sprintf("type %s cannot be submitted here; use POST /api/v1/imports or /api/v1/exports", echo(req.Type)))
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	if len(req.Params) == 0 || string(req.Params) == "null" {
		req.Params = json.RawMessage(`{}`)
	}
	params, err := normalizeJSON(req.Params)
	if err != nil {
		return err
	}
	req.Params = params
	return s.submit(w, r, jobs.Submission{Type: req.Type, Owner: p.User, BizKey: idempotencyBizKey(key), Params: req.Params, RequestID: requestID(r.Context())},
		notifyOf(req.NotifyURL, req.NotifySecret))
}

func idempotencyBizKey(key string) string {
	if key == "" {
		return ""
	}
	return "idem:" + key
}

// submit creates the task and answers 202 (created) or 200 (an earlier identical submit).
// A key reused with different parameters is refused rather than silently answered with a
// task that does something else. With a notify_url the task gets a webhook subscription (the
// URL is checked first, so a refused one leaves no task behind).
func (s *Server) submit(w http.ResponseWriter, r *http.Request, sub jobs.Submission, notify *notifyRequest) error {
	if err := notify.check(r.Context(), s); err != nil {
		return err
	}
	t, created, err := s.Submitter.Submit(r.Context(), sub)
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if !created {
		if strings.HasPrefix(sub.BizKey, "idem:") && !jsonEqual(t.Params, sub.Params) {
			return problem(http.StatusUnprocessableEntity, "idempotency_key_reused",
				"this Idempotency-Key was already used for a request with different parameters (task "+t.TaskNo+")")
		}
		status = http.StatusOK
	}
	hook, err := notify.bind(r.Context(), s, t, sub.Owner)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/tasks/"+t.TaskNo)
	writeJSON(w, status, SubmitView{Task: s.view(context.WithoutCancel(r.Context()), t), Duplicate: !created, Webhook: hook})
	return nil
}

// jsonEqual compares two JSON documents by value (Postgres jsonb reorders keys).
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
