package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/taskview"
)

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
			case !sr.Created && strings.HasPrefix(subs[k].BizKey, "idem:") && !jsonEqual(sr.Task.Params, subs[k].Params):
				out[i].Result, out[i].Problem = "problem", problem.New(http.StatusUnprocessableEntity, "idempotency_key_reused",
					"this idempotency_key was already used for a submit with different parameters (task "+sr.Task.TaskNo+")")
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
