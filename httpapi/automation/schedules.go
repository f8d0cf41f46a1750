package automation

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/httpapi/problem"
	"github.com/taskcenter/taskcenter/httpapi/request"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/textcheck"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/schedule"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store/schedules"
)

// ScheduleView is a recurring task as the API shows it.
type ScheduleView struct {
	ID       string          `json:"id"`
	Owner    string          `json:"owner"`
	Type     string          `json:"type"`
	Params   json.RawMessage `json:"params"`
	Priority int             `json:"priority,omitempty"`
	Cron     string          `json:"cron"`
	Timezone string          `json:"timezone"`
	Paused   bool            `json:"paused"`
	// PausedReason says why the schedule paused itself (its runs kept failing).
	PausedReason string     `json:"paused_reason,omitempty"`
	LastFiredAt  *time.Time `json:"last_fired_at"`
	LastTask     string     `json:"last_task,omitempty"`
	LastOutcome  string     `json:"last_outcome,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	Fires        []FireView `json:"fires,omitempty"`
}

// FireView is one recorded fire of a schedule.
type FireView struct {
	Slot    time.Time `json:"slot"`
	Task    string    `json:"task,omitempty"`
	Outcome string    `json:"outcome"`
}

func scheduleView(sc *schedules.Schedule) ScheduleView {
	return ScheduleView{ID: sc.ScheduleNo, Owner: sc.Owner, Type: sc.Type, Params: sc.Params, Priority: sc.Priority, Cron: sc.Cron,
		Timezone: sc.Timezone, Paused: sc.Paused, PausedReason: sc.PausedReason, LastFiredAt: taskview.UTC(sc.LastFiredAt), LastTask: sc.LastTaskNo,
		LastOutcome: sc.LastOutcome, CreatedAt: sc.CreatedAt.UTC()}
}

// CreateSchedule answers POST /api/v1/schedules {type, params, cron, timezone, priority?}:
// the params are checked now, exactly as a submit of the type would check them.
func (s *Service) CreateSchedule(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	var req struct {
		Type     string          `json:"type"`
		Params   json.RawMessage `json:"params"`
		Cron     string          `json:"cron"`
		Timezone string          `json:"timezone"`
		Priority int             `json:"priority"`
		// MinInterval lowers schedules.min_interval for this schedule (admins only).
		MinInterval string `json:"min_interval"`
	}
	if err := request.DecodeJSON(r, &req); err != nil {
		return err
	}
	t, ok := s.Types.Lookup(req.Type)
	if !ok || !t.Submittable || !s.Submitter.Enabled(req.Type) {
		return problem.New(http.StatusUnprocessableEntity, "unknown_type",
			fmt.Sprintf("type %s cannot be scheduled; GET /api/v1/types lists the types you may submit", textcheck.Echo(req.Type)))
	}
	who := jobs.Who{User: p.User, Admin: p.Scope().Admin}
	if !t.MaySubmit(who) {
		return problem.New(http.StatusForbidden, "forbidden_type", fmt.Sprintf("only an admin may schedule %s tasks", t.Name))
	}
	req.Timezone = strings.TrimSpace(req.Timezone)
	if req.Timezone == "" {
		req.Timezone = "UTC"
	}
	var errs []problem.FieldError
	if m, bad := textcheck.Problem(req.Cron, 100); bad || strings.TrimSpace(req.Cron) == "" {
		if !bad {
			m = msg.New("field_error.cron_required")
		}
		errs = append(errs, problem.Field("cron", m))
	} else if err := schedule.Validate(req.Cron, req.Timezone); err != nil {
		errs = append(errs, specProblem(err))
	} else if min, fe := s.minInterval(req.MinInterval, who); fe != nil {
		errs = append(errs, *fe)
	} else if err := schedule.CheckInterval(req.Cron, req.Timezone, min); err != nil {
		errs = append(errs, specProblem(err))
	}
	if m, bad := jobs.PriorityProblem(req.Priority); bad {
		errs = append(errs, problem.Field("priority", m))
	}
	if len(errs) > 0 {
		return problem.New(http.StatusUnprocessableEntity, "invalid_schedule", "the schedule has invalid fields").WithErrors(errs...)
	}
	if len(req.Params) > 0 {
		normal, err := request.NormalizeJSON(req.Params)
		if err != nil {
			return err
		}
		req.Params = normal
	}
	params, _, err := t.Decode(req.Params, who)
	if err != nil {
		return err
	}
	sc, err := s.Store.CreateSchedule(r.Context(), schedules.NewSchedule{ScheduleNo: "sch_" + rand.Text(), Owner: p.User, Type: t.Name,
		Params: params, Priority: req.Priority, Cron: strings.TrimSpace(req.Cron), Timezone: req.Timezone,
		MaxPerOwner: s.Schedules.MaxPerOwner})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/schedules/"+sc.ScheduleNo)
	request.WriteJSON(w, http.StatusCreated, scheduleView(sc))
	return nil
}

// minInterval is the shortest gap between fires the schedule may have: the deployment's
// schedules.min_interval, or what an admin asked for instead.
func (s *Service) minInterval(asked string, who jobs.Who) (time.Duration, *problem.FieldError) {
	if asked == "" {
		return s.Schedules.MinInterval, nil
	}
	d, err := time.ParseDuration(asked)
	switch {
	case err != nil || d < time.Second:
		fe := problem.Field("min_interval", msg.New("field_error.min_interval", "min", "1s", "a", "30s", "b", "2m"))
		return 0, &fe
	case !who.Admin:
		fe := problem.Field("min_interval", msg.New("field_error.min_interval_admin", "min", s.Schedules.MinInterval.String()))
		return 0, &fe
	}
	return d, nil
}

// specProblem is the field error of a cron spec or time zone schedule refused.
func specProblem(err error) problem.FieldError {
	var se *schedule.SpecError
	if errors.As(err, &se) {
		return problem.Field(se.Field, se.Message)
	}
	return problem.Field("cron", msg.Plain(err.Error()))
}

// ListSchedules answers GET /api/v1/schedules[?owner=] (an admin sees everyone's).
func (s *Service) ListSchedules(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	owner, err := identity.OwnerQuery(r.URL.Query(), p, msg.New("field_error.others_schedules"))
	if err != nil {
		return err
	}
	list, err := s.Store.ListSchedules(r.Context(), p.Scope(), owner)
	if err != nil {
		return err
	}
	request.WriteItems(w, list, scheduleView)
	return nil
}

// GetSchedule answers GET /api/v1/schedules/{id}: the schedule and its latest fires.
func (s *Service) GetSchedule(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	sc, err := s.scheduleOf(r, p)
	if err != nil {
		return err
	}
	fires, err := s.Store.ScheduleFires(r.Context(), sc.ID, 20)
	if err != nil {
		return err
	}
	v := scheduleView(sc)
	for _, f := range fires {
		v.Fires = append(v.Fires, FireView{Slot: f.Slot.UTC(), Task: f.TaskNo, Outcome: f.Outcome})
	}
	request.WriteJSON(w, http.StatusOK, v)
	return nil
}

// PauseSchedule and ResumeSchedule answer POST /api/v1/schedules/{id}/pause and /resume.
func (s *Service) PauseSchedule(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.setPaused(w, r, p, true)
}

func (s *Service) ResumeSchedule(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	return s.setPaused(w, r, p, false)
}

func (s *Service) setPaused(w http.ResponseWriter, r *http.Request, p identity.Principal, paused bool) error {
	id, err := scheduleID(r)
	if err != nil {
		return err
	}
	sc, err := s.Store.PauseSchedule(r.Context(), id, p.Scope(), paused)
	if err != nil {
		return err
	}
	request.WriteJSON(w, http.StatusOK, scheduleView(sc))
	return nil
}

// DeleteSchedule answers DELETE /api/v1/schedules/{id}: it never fires again.
func (s *Service) DeleteSchedule(w http.ResponseWriter, r *http.Request, p identity.Principal) error {
	id, err := scheduleID(r)
	if err != nil {
		return err
	}
	if err := s.Store.DeleteSchedule(r.Context(), id, p.Scope()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) scheduleOf(r *http.Request, p identity.Principal) (*schedules.Schedule, error) {
	id, err := scheduleID(r)
	if err != nil {
		return nil, err
	}
	return s.Store.GetSchedule(r.Context(), id, p.Scope())
}

func scheduleID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if m, bad := textcheck.Problem(id, request.MaxID); bad {
		return "", problem.Invalid("invalid_id", "the schedule id in the path is not valid: it "+m.English(), problem.Field("id", m))
	}
	return id, nil
}
