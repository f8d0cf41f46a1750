package httpapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/pg"
	"github.com/taskcenter/taskcenter/store/schedules"
)

// The table of error kinds to HTTP answers. Anything not listed is a 500 whose body says
// nothing about the cause: the cause goes to the log with the request id.
func toProblem(err error) *problem.Problem {
	var p *problem.Problem
	if errors.As(err, &p) {
		return p
	}
	if p := refusalProblem(err); p != nil {
		return p
	}
	if p := importProblem(err); p != nil {
		return p
	}
	if p := outageProblem(err); p != nil {
		return p
	}
	return problem.Say(http.StatusInternalServerError, "internal", nil)
}

// refusalProblem answers what the request asked that the rules refuse: a bad filter, a body
// too slow, a schedule too many, a task not there or in the wrong status, bad input, a
// full queue. Nil when err is none of these.
func refusalProblem(err error) *problem.Problem {
	var (
		filter   *export.FilterError
		slow     *request.SlowBodyError
		conflict *store.ConflictError
		bad      *jobs.BadInputError
		busy     *jobs.BusyError
		target   *webhook.FieldError
		reused   *jobs.KeyReusedError
	)
	switch {
	case errors.As(err, &filter):
		p := problem.New(http.StatusUnprocessableEntity, "bad_filter", "the filter is not valid: "+filter.Error())
		for _, f := range filter.Fields {
			p.Errors = append(p.Errors, problem.Field("filter."+f.Field, f.Message))
		}
		return p
	case errors.As(err, &slow):
		return slow.Problem()
	case errors.Is(err, schedules.ErrTooMany):
		return problem.New(http.StatusConflict, "too_many_schedules",
			"you keep as many schedules as one owner may; delete one you no longer need first")
	case errors.Is(err, schedules.ErrNotFound):
		return problem.Say(http.StatusNotFound, "schedule_not_found", nil)
	case errors.Is(err, store.ErrNotFound):
		return problem.New(http.StatusNotFound, "task_not_found", "no task with this id is visible to you")
	case errors.As(err, &conflict):
		p := problem.New(http.StatusConflict, "status_conflict", conflict.Error())
		p.Params = msg.Params{"op": conflict.Op, "status": string(conflict.Status)}
		return p
	case errors.As(err, &bad):
		return problem.New(http.StatusUnprocessableEntity, bad.Code, bad.Message)
	case errors.As(err, &reused):
		return problem.New(http.StatusUnprocessableEntity, "idempotency_key_reused", reused.Error())
	case errors.As(err, &target):
		return problem.New(http.StatusUnprocessableEntity, target.Code, target.Message).WithErrors(problem.Field(target.Field, target.Reason))
	case errors.As(err, &busy):
		p := problem.New(http.StatusTooManyRequests, "queue_busy", busy.Error())
		if busy.Owner != "" {
			p = problem.New(http.StatusTooManyRequests, "owner_waiting_limit", busy.Error())
		}
		p.WithRetryAfter(int(max(busy.RetryAfter.Seconds(), 1)))
		return p
	case errors.Is(err, jobs.ErrUnknownType):
		return problem.New(http.StatusUnprocessableEntity, "unknown_type", err.Error())
	}
	return nil
}

// importProblem answers an import's refusals: a file that cannot be imported (its kind
// picks the status), and an undo that may not run. Nil when err is neither.
func importProblem(err error) *problem.Problem {
	var (
		file   *importer.FileProblem
		header *importer.HeaderError
		undo   *importer.UndoRefused
	)
	switch {
	case errors.As(err, &file):
		status := map[importer.ProblemKind]int{importer.Unsupported: http.StatusUnsupportedMediaType,
			importer.Invalid: http.StatusUnprocessableEntity, importer.TooLarge: http.StatusRequestEntityTooLarge,
			importer.BadForm: http.StatusBadRequest, importer.Gone: http.StatusGone}[file.Kind]
		p := problem.New(status, file.Code, file.Message)
		p.Params = file.Params
		if file.Field != "" {
			p.Errors = []problem.FieldError{problem.Field(file.Field, file.FieldMessage)}
		}
		if errors.As(err, &header) {
			p.Details = header.Details
		}
		return p
	case errors.As(err, &undo):
		if undo.Gone {
			return problem.New(http.StatusGone, undo.Code, undo.Message)
		}
		return problem.New(http.StatusConflict, undo.Code, undo.Message)
	}
	return nil
}

// outageProblem answers a dependency that failed with a 503 naming it. The other parts'
// sentinels come first: Postgres's test takes any network error or deadline for its own.
// Nil when err is no outage.
func outageProblem(err error) *problem.Problem {
	var p *problem.Problem
	switch {
	case errors.Is(err, auth.ErrProviderUnavailable):
		p = problem.New(http.StatusServiceUnavailable, "identity_provider_unavailable",
			"the identity provider cannot be reached to check the token; try again shortly")
		p.WithRetryAfter(10)
	case errors.Is(err, storage.ErrUnavailable):
		p = problem.New(http.StatusServiceUnavailable, "object_store_unavailable",
			"the file store (S3) cannot be reached; try again shortly")
		p.WithRetryAfter(5)
	case pg.IsTimeout(err):
		p = problem.Say(http.StatusServiceUnavailable, "database_timeout", nil)
		p.WithRetryAfter(2)
	case pg.IsUnavailable(err):
		p = problem.Say(http.StatusServiceUnavailable, "database_unavailable", nil)
		p.WithRetryAfter(5)
	}
	return p
}

// outageOf names the dependency whose outage err is, by the error's type (the same order as
// toProblem), with its tracker; counted is false when the dependency's own client (the
// identity provider's, the object store's) already counted the failed call.
func (s *Server) outageOf(err error) (name string, dep jobs.Dependency, counted bool) {
	switch {
	case errors.Is(err, auth.ErrProviderUnavailable):
		return "identity_provider", s.IdentityProvider, true
	case errors.Is(err, storage.ErrUnavailable):
		return "object_store", s.ObjectStore, true
	case pg.IsTimeout(err):
		return "", nil, false // busy, not gone: an error of its own
	case pg.IsUnavailable(err):
		return "postgres", s.Postgres, false
	}
	return "", nil, false
}

// writeError answers with the problem for err, logging the cause of server-side failures.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := toProblem(err)
	p.RequestID = problem.RequestID(r.Context())
	s.logFailure(r, err, p)
	p.Write(w)
}

// logFailure logs the cause of a server-side failure p (the problem for err) met while
// answering r, or counts it against the outage of the dependency that failed.
func (s *Server) logFailure(r *http.Request, err error, p *problem.Problem) {
	name, dep, counted := s.outageOf(err)
	switch {
	case name != "":
		// An outage is reported once, by its dependency's tracker, and summarised when it
		// ends; each 503 during it is counted there, not logged as an error of its own. Each
		// dependency has its own tracker, told apart by the error's type.
		if dep != nil && !counted {
			dep.Fail(err)
		}
		if dep == nil || !dep.Suppress() {
			s.Logger.LogAttrs(r.Context(), slog.LevelWarn, "request failed: "+name+" unavailable", slog.String("dependency", name),
				slog.String("request_id", p.RequestID), slog.String("route", r.Pattern), slog.Any("err", err))
		}
	case p.Status >= 500:
		s.Logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", p.RequestID), slog.String("route", r.Pattern), slog.Any("err", err))
	}
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) { request.WriteJSON(w, status, v) }
