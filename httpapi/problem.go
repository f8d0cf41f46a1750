package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/pg"
	"github.com/taskcenter/taskcenter/store/schedules"
)

// Problem is an RFC 9457 problem details body (application/problem+json).
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Code is a stable machine-readable reason, e.g. "task_not_found".
	Code string `json:"code"`
	// Errors lists field problems of a rejected request.
	Errors []FieldError `json:"errors,omitempty"`

	retryAfter int // seconds; sent as Retry-After
}

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (p *Problem) Error() string { return p.Detail }

// problem builds a Problem; type URIs are relative references into the API description.
func problem(status int, code, detail string) *Problem {
	return &Problem{Type: ProblemType(code), Title: http.StatusText(status), Status: status, Code: code, Detail: detail}
}

// The table of error kinds to HTTP answers. Anything not listed is a 500 whose body says
// nothing about the cause: the cause goes to the log with the request id.
func toProblem(err error) *Problem {
	var (
		p        *Problem
		filter   *export.FilterError
		slow     *SlowBodyError
		conflict *store.ConflictError
		bad      *jobs.BadInputError
		busy     *jobs.BusyError
		file     *importer.FileProblem
	)
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &filter):
		p := problem(http.StatusUnprocessableEntity, "bad_filter", "the filter is not valid: "+filter.Error())
		for _, f := range filter.Fields {
			p.Errors = append(p.Errors, FieldError{"filter." + f.Field, f.Message})
		}
		return p
	case errors.As(err, &slow):
		return slowProblem(slow)
	case errors.Is(err, schedules.ErrNotFound):
		return problem(http.StatusNotFound, "schedule_not_found", "no schedule with this id is visible to you")
	case errors.Is(err, store.ErrNotFound):
		return problem(http.StatusNotFound, "task_not_found", "no task with this id is visible to you")
	case errors.As(err, &conflict):
		return problem(http.StatusConflict, "status_conflict", conflict.Error())
	case errors.As(err, &bad):
		return problem(http.StatusUnprocessableEntity, bad.Code, bad.Message)
	case errors.As(err, &busy):
		p := problem(http.StatusTooManyRequests, "queue_busy", busy.Error())
		if busy.Owner != "" {
			p = problem(http.StatusTooManyRequests, "owner_waiting_limit", busy.Error())
		}
		p.retryAfter = int(max(busy.RetryAfter.Seconds(), 1))
		return p
	case errors.As(err, &file):
		status := map[importer.ProblemKind]int{importer.Unsupported: http.StatusUnsupportedMediaType,
			importer.Invalid: http.StatusUnprocessableEntity, importer.TooLarge: http.StatusRequestEntityTooLarge}[file.Kind]
		p := problem(status, file.Code, file.Message)
		if file.Field != "" {
			p.Errors = []FieldError{{file.Field, file.FieldMessage}}
		}
		return p
	case errors.Is(err, jobs.ErrUnknownType):
		return problem(http.StatusUnprocessableEntity, "unknown_type", err.Error())
	case pg.IsTimeout(err):
		p := problem(http.StatusServiceUnavailable, "database_timeout", "the task database did not answer in time; try again shortly")
		p.retryAfter = 2
		return p
	case pg.IsUnavailable(err):
		p := problem(http.StatusServiceUnavailable, "unavailable", "the task database is unavailable; try again shortly")
		p.retryAfter = 5
		return p
	default:
		return problem(http.StatusInternalServerError, "internal", "an internal error occurred; quote the request id when reporting it")
	}
}

// writeError answers with the problem for err, logging the cause of server-side failures.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := toProblem(err)
	p.RequestID = requestID(r.Context())
	switch {
	case p.Code == "unavailable" && s.Postgres != nil:
		// An outage is reported once, by its tracker, and summarised when it ends; each 503
		// during it is counted there, not logged as an error of its own.
		s.Postgres.Fail(err)
		if !s.Postgres.Suppress() {
			s.Logger.LogAttrs(r.Context(), slog.LevelWarn, "request failed: database unavailable",
				slog.String("request_id", p.RequestID), slog.String("route", r.Pattern), slog.Any("err", err))
		}
	case p.Status >= 500:
		s.Logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", p.RequestID), slog.String("route", r.Pattern), slog.Any("err", err))
	}
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p) //nolint:errcheck // the client went away
}

// withErrors adds field problems.
func (p *Problem) withErrors(errs ...FieldError) *Problem {
	p.Errors = append(p.Errors, errs...)
	return p
}

// badRequest is a 400 for a malformed request.
func badRequest(code, format string, args ...any) *Problem {
	return problem(http.StatusBadRequest, code, fmt.Sprintf(format, args...))
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) //nolint:errcheck // the client went away
}
