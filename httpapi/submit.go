package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/httpapi/automation"
	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// exportRequest is the body of POST /api/v1/exports.
type exportRequest struct {
	// Type is "customers" or "tasks" (the task type without its "export:" prefix also works).
	Type   string          `json:"type"`
	Filter json.RawMessage `json:"filter"`
	// NotifyURL is told when the task ends (a signed webhook); NotifySecret signs it.
	NotifyURL    string `json:"notify_url"`
	NotifySecret string `json:"notify_secret"`
	// Lang is the file's language ("zh" or "en"); default the request's Accept-Language.
	Lang string `json:"lang"`
}

// SubmitView is a submit's answer: the task, and whether it already existed.
type SubmitView struct {
	Task      TaskView `json:"task"`
	Duplicate bool     `json:"duplicate"`
	// Webhook is the subscription a notify_url made; its secret is shown only here.
	Webhook *automation.WebhookView `json:"webhook,omitempty"`
}

// submitExport answers POST /api/v1/exports. With an Idempotency-Key header, repeating the
// request returns the first task (200, duplicate true) instead of creating another.
func (s *Server) submitExport(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	var req exportRequest
	if err := request.DecodeJSON(r, &req); err != nil {
		return err
	}
	taskType := req.Type
	if !strings.Contains(taskType, ":") {
		taskType = "export:" + taskType
	}
	// The filter is checked field by field first, for problems naming each field; the type
	// then decodes the same parameters as the generic submit would.
	switch taskType {
	case export.CustomersType:
		if _, err := request.DecodeFilter[export.CustomerFilter](req.Filter); err != nil {
			return err
		}
	case export.TasksType:
		f, err := request.DecodeFilter[export.TaskFilter](req.Filter)
		if err != nil {
			return err
		}
		if f.Owner != "" && !p.Scope().Admin && f.Owner != p.User {
			return problem.New(http.StatusForbidden, "forbidden", "only an admin can export other users' tasks")
		}
	default:
		return problem.New(http.StatusUnprocessableEntity, "unknown_type", fmt.Sprintf("type %s is not an export; use customers or tasks", textcheck.Echo(req.Type)))
	}
	filter := req.Filter
	if len(filter) == 0 || string(filter) == "null" {
		filter = json.RawMessage(`{}`)
	}
	lang := msg.ParseLang(cmp.Or(req.Lang, r.Header.Get("Accept-Language")))
	params, err := json.Marshal(map[string]any{"filter": filter, "lang": lang})
	if err != nil {
		return err
	}
	return s.submitType(w, r, p, taskType, params, 0, "", webhooks.Notify{URL: req.NotifyURL, Secret: req.NotifySecret})
}

// submitTask answers POST /api/v1/tasks {type, params, title?, priority?}: a task of any type
// the registry declares submittable (GET /api/v1/types lists them with their schemas).
func (s *Server) submitTask(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	var req struct {
		Type         string          `json:"type"`
		Params       json.RawMessage `json:"params"`
		Title        string          `json:"title"`
		Priority     int             `json:"priority"`
		NotifyURL    string          `json:"notify_url"`
		NotifySecret string          `json:"notify_secret"`
	}
	if err := request.DecodeJSON(r, &req); err != nil {
		return err
	}
	return s.submitType(w, r, p, req.Type, req.Params, req.Priority, req.Title, webhooks.Notify{URL: req.NotifyURL, Secret: req.NotifySecret})
}

// submitType submits a task of a registered type: its parameters decoded strictly and
// prepared for the caller by the type itself, so this file holds no per-type code.
func (s *Server) submitType(w http.ResponseWriter, r *http.Request, p identity.Principal, typeName string, rawParams json.RawMessage,
	priority int, title string, notify webhooks.Notify) error {
	key, err := request.IdempotencyKey(r)
	if err != nil {
		return err
	}
	sub, err := s.prepareSubmission(p, typeName, rawParams, priority, title, key)
	if err != nil {
		return err
	}
	sub.RequestID = problem.RequestID(r.Context())
	if sub.Notify, err = s.Webhooks.Notify(r.Context(), notify, sub.Owner); err != nil {
		return err
	}
	return s.submit(w, r, sub)
}

// prepareSubmission turns a submit of a registered type into a Submission, or the problem
// that refuses it.
func (s *Server) prepareSubmission(p identity.Principal, typeName string, rawParams json.RawMessage, priority int, title, key string) (jobs.Submission, error) {
	t, ok := s.Types.Lookup(typeName)
	if !ok || !t.Submittable {
		return jobs.Submission{}, problem.New(http.StatusUnprocessableEntity, "unknown_type",
			fmt.Sprintf("type %s cannot be submitted here; GET /api/v1/types lists the types you may submit (imports: POST /api/v1/imports)", textcheck.Echo(typeName)))
	}
	who := jobs.Who{User: p.User, Admin: p.Scope().Admin}
	if !t.MaySubmit(who) {
		return jobs.Submission{}, problem.New(http.StatusForbidden, "forbidden_type", fmt.Sprintf("only an admin may submit %s tasks", t.Name))
	}
	var errs []problem.FieldError
	if m, bad := jobs.PriorityProblem(priority); bad {
		errs = append(errs, problem.Field("priority", m))
	}
	if m, bad := titleProblem(title); bad {
		errs = append(errs, problem.Field("title", m))
	}
	if len(errs) > 0 {
		return jobs.Submission{}, problem.New(http.StatusUnprocessableEntity, "invalid_submit", "the submit has invalid fields").WithErrors(errs...)
	}
	if len(rawParams) > 0 {
		// Invalid UTF-8 becomes U+FFFD here, so what the task stores is what jsonb accepts.
		normal, err := request.NormalizeJSON(rawParams)
		if err != nil {
			return jobs.Submission{}, err
		}
		rawParams = normal
	}
	params, named, err := t.Decode(rawParams, who)
	if err != nil {
		return jobs.Submission{}, err
	}
	if own := strings.TrimSpace(title); own != "" {
		named = jobs.Title{Text: own}
	}
	return jobs.Submission{Type: t.Name, Owner: p.User, BizKey: jobs.CallerKey(key), Params: params,
		Priority: priority, Title: named.Text, TitleMessage: named.Message}, nil
}

// titleProblem says what is wrong with a title a client gave, with bad true (false when
// nothing is).
func titleProblem(title string) (m msg.Message, bad bool) {
	switch {
	case !utf8.ValidString(title) || strings.ContainsRune(title, 0):
		return msg.New("field_error.title_text"), true
	case utf8.RuneCountInString(title) > 200:
		return msg.New("field_error.too_long", "max", "200"), true
	}
	return msg.Message{}, false
}

// trimmedOr is s without surrounding space, or def when nothing is left.
func trimmedOr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return strings.TrimSpace(s)
}

// submit creates the task and answers (answerSubmit).
func (s *Server) submit(w http.ResponseWriter, r *http.Request, sub jobs.Submission) error {
	res, err := s.Submitter.SubmitMany(r.Context(), []jobs.Submission{sub})
	if err != nil {
		return err
	}
	return s.answerSubmit(w, r, res[0])
}

// answerSubmit answers a submit: 202 and the task it created, or 200 and an earlier identical
// submit's, with the webhook its notify_url made or bound (jobs.Submitter checks a reused
// key and binds the notification; a refused URL was refused before, leaving no task).
func (s *Server) answerSubmit(w http.ResponseWriter, r *http.Request, res jobs.SubmitResult) error {
	if res.Err != nil {
		return res.Err
	}
	status := http.StatusAccepted
	if !res.Created {
		status = http.StatusOK
	}
	w.Header().Set("Location", "/api/v1/tasks/"+res.Task.TaskNo)
	writeJSON(w, status, SubmitView{Task: s.view(context.WithoutCancel(r.Context()), res.Task, readerLang(w, r)),
		Duplicate: !res.Created, Webhook: automation.SubmittedView(res)})
	return nil
}

// maxBatch caps one batch submit.
const maxBatch = 1000

// BatchItemView is one submission's answer in a batch.
type BatchItemView struct {
	Index   int              `json:"index"`
	Result  string           `json:"result"` // created | duplicate | problem
	Task    *TaskView        `json:"task,omitempty"`
	Problem *problem.Problem `json:"problem,omitempty"`
}

// submitBatch answers POST /api/v1/tasks:batch {tasks: [{type, params, title?, priority?,
// idempotency_key?}]}: up to 1,000 tasks admitted one by one, created in one transaction and
// handed to asynq together. The answer lists each submission's outcome in order.
func (s *Server) submitBatch(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	var req struct {
		Tasks []struct {
			Type           string          `json:"type"`
			Params         json.RawMessage `json:"params"`
			Title          string          `json:"title"`
			Priority       int             `json:"priority"`
			IdempotencyKey string          `json:"idempotency_key"`
		} `json:"tasks"`
	}
	if err := request.DecodeJSON(r, &req); err != nil {
		return err
	}
	if len(req.Tasks) == 0 || len(req.Tasks) > maxBatch {
		return problem.Invalid("invalid_batch", fmt.Sprintf("send from 1 to %d tasks", maxBatch),
			problem.Field("tasks", msg.New("field_error.tasks_count", "max", strconv.Itoa(maxBatch))))
	}
	out := make([]BatchItemView, len(req.Tasks))
	var (
		subs []jobs.Submission
		idx  []int
	)
	for i, t := range req.Tasks {
		out[i].Index = i
		key := strings.TrimSpace(t.IdempotencyKey)
		if m, bad := textcheck.Problem(key, request.MaxIdempotencyKey); bad {
			out[i].Result, out[i].Problem = "problem", problem.Invalid("bad_idempotency_key", "idempotency_key "+m.English(), problem.Field("idempotency_key", m))
			continue
		}
		sub, err := s.prepareSubmission(p, t.Type, t.Params, t.Priority, t.Title, key)
		if err != nil {
			out[i].Result, out[i].Problem = "problem", toProblem(err)
			continue
		}
		sub.RequestID = problem.RequestID(r.Context())
		subs = append(subs, sub)
		idx = append(idx, i)
	}
	if len(subs) > 0 {
		res, err := s.Submitter.SubmitMany(r.Context(), subs)
		if err != nil {
			return err
		}
		for k, sr := range res {
			i := idx[k]
			switch {
			case sr.Err != nil:
				out[i].Result, out[i].Problem = "problem", toProblem(sr.Err)
			default:
				v := taskview.Of(sr.Task, nil, time.Now(), readerLang(w, r))
				out[i].Task = &v
				out[i].Result = "created"
				if !sr.Created {
					out[i].Result = "duplicate"
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Items []BatchItemView `json:"items"`
	}{out})
	return nil
}
