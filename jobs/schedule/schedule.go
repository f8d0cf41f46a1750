// Package schedule runs recurring tasks: the schedules users keep in Postgres, and the
// periodic cleanup, fed to asynq's periodic task manager by one provider so every scheduler
// replica agrees on what fires when. Each fire of a user's schedule creates its task through
// the normal submit path (insert before enqueue, admission control, fair share) with a biz
// key of (schedule, slot): a slot yields exactly one task however many schedulers fire it.
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/schedules"
)

// FireType is the asynq job type of one fire of a user's schedule.
const FireType = "schedule:fire"

// firePayload names the schedule a fire is for.
type firePayload struct {
	ScheduleID int64  `json:"schedule_id"`
	Cron       string `json:"cron"`
	Timezone   string `json:"timezone"`
}

// Cleanup is the periodic cleanup's place among the periodic tasks.
type Cleanup struct {
	Spec     string // cron spec
	Timezone string
	Queue    string
}

// Provider is asynq's PeriodicTaskConfigProvider: the cleanup round plus every active
// schedule, read from Postgres at each sync.
type Provider struct {
	store   *store.Store
	cleanup Cleanup
	queue   string // where fires run
	logger  *slog.Logger
}

var _ asynq.PeriodicTaskConfigProvider = (*Provider)(nil)

// NewProvider returns the provider; fires run on queue.
func NewProvider(st *store.Store, c Cleanup, queue string, logger *slog.Logger) *Provider {
	return &Provider{store: st, cleanup: c, queue: queue, logger: logger}
}

// GetConfigs implements asynq.PeriodicTaskConfigProvider.
func (p *Provider) GetConfigs() ([]*asynq.PeriodicTaskConfig, error) {
	out := []*asynq.PeriodicTaskConfig{{
		Cronspec: Spec(p.cleanup.Spec, p.cleanup.Timezone), Task: asynq.NewTask(cleanup.Type, nil),
		Opts: []asynq.Option{asynq.Queue(p.cleanup.Queue), asynq.MaxRetry(0), asynq.Timeout(10 * time.Minute)},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	schedules, err := p.store.ActiveSchedules(ctx)
	if err != nil {
		// Keep firing the cleanup; the schedules come back at the next sync.
		p.logger.Warn("could not read schedules; firing only the cleanup until the next sync", "err", err)
		return out, nil
	}
	for _, sc := range schedules {
		body, _ := json.Marshal(firePayload{ScheduleID: sc.ID, Cron: sc.Cron, Timezone: sc.Timezone})
		out = append(out, &asynq.PeriodicTaskConfig{
			Cronspec: Spec(sc.Cron, sc.Timezone), Task: asynq.NewTask(FireType, body),
			Opts: []asynq.Option{asynq.Queue(p.queue), asynq.MaxRetry(5), asynq.Timeout(time.Minute)},
		})
	}
	return out, nil
}

// Spec is a cron spec read in a time zone, as asynq's scheduler (robfig/cron) takes it.
func Spec(spec, timezone string) string {
	if timezone == "" || strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=") {
		return spec
	}
	return "CRON_TZ=" + timezone + " " + spec
}

// SpecError is a schedule's cron spec or time zone refused, in words the user can act on:
// the field at fault (cron or timezone) and what is wrong with it.
type SpecError struct {
	Field   string
	Message msg.Message
}

func (e *SpecError) Error() string { return e.Message.English() }

// Validate checks a cron spec and a time zone a user gave; a refusal is a *SpecError.
func Validate(spec, timezone string) error {
	if _, err := time.LoadLocation(timezone); err != nil {
		return &SpecError{Field: "timezone", Message: msg.New("field_error.not_a_timezone", "value", strconv.Quote(timezone), "a", "UTC", "b", "Asia/Shanghai")}
	}
	if strings.Contains(spec, "TZ=") {
		return &SpecError{Field: "cron", Message: msg.New("field_error.cron_timezone", "field", "cron", "other", "timezone")}
	}
	if _, err := cleanup.ParseSpec(Spec(spec, timezone)); err != nil {
		return &SpecError{Field: "cron", Message: msg.New("field_error.not_a_cron", "value", strconv.Quote(spec), "every", `"@every 1h"`)}
	}
	return nil
}

// Firer handles fires: it creates the schedule's task for the slot, or records why not.
type Firer struct {
	store     *store.Store
	submitter *jobs.Submitter
	types     *jobs.Registry // titles the runs
	limits    config.Schedules
	logger    *slog.Logger
}

// NewFirer returns the fire handler; limits.PauseAfterFailures pauses a failing schedule.
// Its runs are titled by their type in types, as a submit titles them.
func NewFirer(st *store.Store, sub *jobs.Submitter, types *jobs.Registry, limits config.Schedules, logger *slog.Logger) *Firer {
	return &Firer{store: st, submitter: sub, types: types, limits: limits, logger: logger.With("component", "schedules")}
}

// ProcessTask implements asynq.Handler.
func (f *Firer) ProcessTask(ctx context.Context, job *asynq.Task) error {
	var p firePayload
	if err := json.Unmarshal(job.Payload(), &p); err != nil || p.ScheduleID == 0 {
		return fmt.Errorf("unreadable schedule fire: %w", asynq.SkipRetry)
	}
	sc, err := f.store.GetScheduleByID(ctx, p.ScheduleID)
	if errors.Is(err, schedules.ErrNotFound) {
		f.logger.Info("fire of a deleted schedule ignored", "schedule_id", p.ScheduleID)
		return nil
	}
	if err != nil {
		return err
	}
	sched, err := cleanup.ParseSpec(Spec(sc.Cron, sc.Timezone))
	if err != nil {
		return fmt.Errorf("schedule %s: %v: %w", sc.ScheduleNo, err, asynq.SkipRetry)
	}
	loc, _ := time.LoadLocation(sc.Timezone)
	slot := cleanup.Slot(sched, time.Now().In(loc))
	_, err = f.Fire(ctx, sc, slot)
	return err
}

// Fire creates sc's task for slot, or records why it did not: paused, its last runs all
// failed (it pauses itself), the previous run still going (a schedule never piles up runs),
// or the queue refusing work. It returns the outcome.
func (f *Firer) Fire(ctx context.Context, sc *schedules.Schedule, slot time.Time) (string, error) {
	log := f.logger.With("schedule", sc.ScheduleNo, "slot", slot)
	record := func(taskNo, outcome string) (string, error) {
		if _, err := f.store.RecordFire(ctx, sc.ID, slot, taskNo, outcome); err != nil {
			return outcome, err
		}
		log.Info("schedule fired", "outcome", outcome, "task_no", taskNo)
		return outcome, nil
	}
	if sc.Paused {
		return record("", "skipped: paused")
	}
	if reason, err := f.failing(ctx, sc); err != nil || reason != "" {
		if err != nil {
			return "", err
		}
		if _, err := f.store.PauseItself(ctx, sc.ID, reason); err != nil {
			return "", err
		}
		log.Warn("schedule paused itself", "reason", reason)
		return record("", "skipped: "+reason)
	}
	if sc.LastTaskNo != "" {
		prev, err := f.store.Get(ctx, sc.LastTaskNo, store.Scope{Admin: true})
		switch {
		case err == nil && !prev.Status.Terminal():
			return record("", fmt.Sprintf("skipped: the previous run %s is still %s", prev.TaskNo, prev.Status))
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return "", err
		}
	}
	sub := jobs.Submission{Type: sc.Type, Owner: sc.Owner, Params: sc.Params,
		Priority: sc.Priority, BizKey: fmt.Sprintf("schedule:%s:%d", sc.ScheduleNo, slot.Unix())}
	if t, ok := f.types.Lookup(sc.Type); ok {
		title := t.TitleOfStored(sc.Params)
		sub.Title, sub.TitleMessage = title.Text, title.Message
	}
	task, created, err := f.submitter.Submit(ctx, sub)
	var busy *jobs.BusyError
	switch {
	case errors.As(err, &busy):
		return record("", "skipped: "+busy.Error())
	case errors.Is(err, jobs.ErrUnknownType):
		return record("", fmt.Sprintf("skipped: task type %s is not available", sc.Type))
	case err != nil:
		return "", err
	case !created:
		return record(task.TaskNo, "created by another scheduler's fire of the same slot")
	}
	return record(task.TaskNo, "created")
}

// failing says why sc should pause itself when its last limits.PauseAfterFailures runs all
// ended FAILED or TIMEOUT (a cancelled run, or one still going, breaks the streak), else "".
func (f *Firer) failing(ctx context.Context, sc *schedules.Schedule) (string, error) {
	n := f.limits.PauseAfterFailures
	if n <= 0 {
		return "", nil
	}
	runs, err := f.store.LastRuns(ctx, sc.ID, n)
	if err != nil || len(runs) < n {
		return "", err
	}
	for _, r := range runs {
		if r.Status != store.StatusFailed && r.Status != store.StatusTimeout {
			return "", nil
		}
	}
	last := runs[0]
	why := string(last.Status)
	if last.ErrorMessage != "" {
		why += ": " + last.ErrorMessage
	}
	return fmt.Sprintf("paused: its last %d runs failed (the latest, %s, %s); resume it once the cause is fixed", n, last.TaskNo, why), nil
}
