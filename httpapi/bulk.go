package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
)

// maxBulk caps the tasks one bulk action names: a page of the list at its largest is 100.
const maxBulk = 100

// The outcomes of a bulk action for one task.
const (
	BulkDone       = "done"        // the action was carried out, as the single route would have
	BulkNotAllowed = "not_allowed" // the task's status (or rules) refuse it: the single route's 409
	BulkNotFound   = "not_found"   // no such task is visible to the caller: the single route's 404
	BulkError      = "error"       // the server could not act on it now (5xx); try that task again
)

// BulkView is the answer to a bulk cancel or retry: one result per task named, in the order
// sent (an id named twice is answered once).
type BulkView struct {
	Results []BulkResult `json:"results"`
}

// BulkResult is what a bulk action did to one task.
type BulkResult struct {
	ID string `json:"id"`
	// Outcome is BulkDone, BulkNotAllowed, BulkNotFound or BulkError.
	Outcome string `json:"outcome"`
	// Code, Params and Message are the problem the single route would have answered (not
	// done only): its code (problem.<code> in the catalogue), the values it names, and its
	// English.
	Code    string     `json:"code,omitempty"`
	Params  msg.Params `json:"params,omitempty"`
	Message string     `json:"message,omitempty"`
	// Task is the task as the action left it (done only).
	Task *TaskView `json:"task,omitempty"`
}

// cancelTasks answers POST /api/v1/tasks/cancel {ids}: each task cancelled as POST
// /api/v1/tasks/{id}/cancel would, one by one; one refused or failing does not stop the rest.
func (s taskRoutes) cancelTasks(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.bulk(w, r, p, audit.ActionTaskCancel, s.cancel)
}

// retryTasks answers POST /api/v1/tasks/retry {ids}: each task retried as POST
// /api/v1/tasks/{id}/retry would, one by one; one refused or failing does not stop the rest.
func (s taskRoutes) retryTasks(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.bulk(w, r, p, audit.ActionTaskRetry, s.retry)
}

// bulk runs act on each task the body names and answers each one's outcome. The audit trail
// holds one row per task, as if each had been its own request: a change's row is written by
// the store with the change, a refusal's here (with the status the single route would have
// answered).
func (s taskRoutes) bulk(w http.ResponseWriter, r *http.Request, p identity.Principal, action string,
	act func(context.Context, string, identity.Principal) (*store.Task, error)) error {
	var req struct {
		IDs []string `json:"ids"`
	}
	if err := request.DecodeJSON(r, &req); err != nil {
		return err
	}
	ids, err := bulkIDs(req.IDs)
	if err != nil {
		return err
	}
	ctx, lang := r.Context(), readerLang(w, r)
	out := BulkView{Results: make([]BulkResult, len(ids))}
	for i, id := range ids {
		res := BulkResult{ID: id, Outcome: BulkDone}
		t, err := act(ctx, id, p)
		if err == nil {
			v := s.view(ctx, t, lang)
			res.Task = &v
			out.Results[i] = res
			continue
		}
		pr := toProblem(err)
		pr.RequestID = problem.RequestID(ctx)
		switch {
		case pr.Status == http.StatusNotFound:
			res.Outcome = BulkNotFound
		case pr.Status == http.StatusConflict:
			res.Outcome = BulkNotAllowed
		default:
			res.Outcome = BulkError
			s.logFailure(r, err, pr)
		}
		res.Code, res.Params, res.Message = pr.Code, pr.Params, pr.Detail
		out.Results[i] = res
		s.id.Record(ctx, s.auditEvent(r, action, id, p, pr.Status, pr))
		audit.FromContext(ctx).Add(1) // the request's own row is this one
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// bulkIDs checks a bulk action's ids: from 1 to maxBulk of them, each one that can be a task
// id; the same id twice counts once (its first place).
func bulkIDs(ids []string) ([]string, error) {
	if len(ids) == 0 || len(ids) > maxBulk {
		return nil, problem.New(http.StatusUnprocessableEntity, "invalid_ids", fmt.Sprintf("name from 1 to %d task ids", maxBulk)).
			WithErrors(problem.Field("ids", msg.New("field_error.ids_count", "max", strconv.Itoa(maxBulk), "n", strconv.Itoa(len(ids)))))
	}
	var errs []problem.FieldError
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for i, id := range ids {
		m, bad := textcheck.Problem(id, request.MaxID)
		if id == "" {
			m, bad = msg.New("field_error.empty"), true
		}
		if bad {
			errs = append(errs, problem.Field(fmt.Sprintf("ids[%d]", i), m))
			continue
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(errs) > 0 {
		return nil, problem.New(http.StatusUnprocessableEntity, "invalid_ids", "some ids cannot be task ids").WithErrors(errs...)
	}
	return out, nil
}
