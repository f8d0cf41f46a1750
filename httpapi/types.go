package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/jobs"
)

// TypeView is one task type a caller may submit.
type TypeView struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Queue       string `json:"queue"`
	Priority    int    `json:"priority"`
	// Submit is how to submit it: POST /api/v1/tasks with {type, params}, or its own endpoint.
	Submit string `json:"submit"`
	// ParamsSchema is the JSON Schema of the type's params.
	ParamsSchema json.RawMessage `json:"params_schema"`
}

// listTypes answers GET /api/v1/types: the task types the caller may submit.
func (s typeRoutes) listTypes(w http.ResponseWriter, _ *http.Request, p identity.Principal) error {
	who := jobs.Who{User: p.User, Admin: p.Scope().Admin}
	out := struct {
		Items []TypeView `json:"items"`
	}{Items: []TypeView{}}
	for _, t := range s.Types.All() {
		if !t.MaySubmit(who) || !s.Submitter.Enabled(t.Name) {
			continue
		}
		submit := "POST /api/v1/tasks"
		if !t.Submittable {
			submit = t.SubmitVia
		}
		out.Items = append(out.Items, TypeView{Name: t.Name, Description: t.Description, Queue: s.Submitter.QueueOf(t.Name),
			Priority: s.Submitter.PriorityOf(t.Name), Submit: submit, ParamsSchema: t.Schema()})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// typeRoutes are the handler of /api/v1/types.
type typeRoutes struct{ *Server }
