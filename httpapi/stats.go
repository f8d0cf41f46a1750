package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/store/stats"
)

// stats answers GET /api/v1/stats?from=&to=&group_by=day,type,status,owner: finished tasks,
// live and archived, counted with their rows and duration percentiles. A user sees their own
// tasks; an admin everyone's. Default: the last 30 days, one total row.
func (s statsRoutes) stats(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	q := r.URL.Query()
	now := time.Now().UTC()
	f := stats.Filter{From: now.AddDate(0, 0, -30).Truncate(24 * time.Hour), To: now.Add(24 * time.Hour).Truncate(24 * time.Hour)}
	var errs []problem.FieldError
	for name, dst := range map[string]*time.Time{"from": &f.From, "to": &f.To} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			if t, err = time.Parse(time.DateOnly, v); err != nil {
				errs = append(errs, problem.Field(name, msg.New("field_error.date_or_time", "example", "2026-11-30")))
				continue
			}
		}
		if t.Year() < 1970 || t.Year() > 9999 {
			errs = append(errs, problem.Field(name, msg.New("field_error.between", "from", "1970", "to", "9999")))
			continue
		}
		*dst = t
	}
	if !f.From.Before(f.To) {
		errs = append(errs, problem.Field("from", msg.New("field_error.before", "other", "to")))
	}
	if f.To.Sub(f.From) > 400*24*time.Hour {
		errs = append(errs, problem.Field("to", msg.New("field_error.span_days", "days", "400")))
	}
	for _, g := range textcheck.SplitList(q["group_by"]) {
		if !slices.Contains(stats.Dimensions, g) {
			errs = append(errs, problem.Field("group_by", msg.New("field_error.some_of", "choices", strings.Join(stats.Dimensions, ", "))))
			break
		}
		f.GroupBy = append(f.GroupBy, g)
	}
	if len(errs) > 0 {
		return problem.Invalid("invalid_query", "the query has invalid parameters", errs...)
	}
	rows, err := s.Store.Stats(r.Context(), f, p.Scope())
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []stats.Row{}
	}
	writeJSON(w, http.StatusOK, struct {
		From  time.Time   `json:"from"`
		To    time.Time   `json:"to"`
		Items []stats.Row `json:"items"`
	}{f.From, f.To, rows})
	return nil
}

// statsRoutes are the handler of /api/v1/stats.
type statsRoutes struct{ *Server }
