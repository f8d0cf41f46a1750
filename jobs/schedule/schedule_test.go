package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/jobs/export"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/schedules"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// A schedule's cron is read in its own time zone: "Mondays 09:00" in Shanghai is 01:00 UTC.
func TestSpecHonoursTheTimezone(t *testing.T) {
	t.Parallel()
	sched, err := cleanup.ParseSpec(Spec("0 9 * * 1", "Asia/Shanghai"))
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) // a Sunday
	next := sched.Next(from)
	if want := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Fatalf("next = %s, want %s", next.UTC(), want)
	}
	loc, _ := time.LoadLocation("Asia/Shanghai")
	if slot := cleanup.Slot(sched, next.Add(30*time.Minute).In(loc)); !slot.Equal(next) {
		t.Fatalf("slot = %s, want %s", slot, next)
	}
}

func TestValidateExplainsBadInput(t *testing.T) {
	t.Parallel()
	for spec, tz := range map[string]string{"0 9 * * 1": "Mars/Olympus", "not a cron": "UTC", "CRON_TZ=UTC 0 9 * * *": "UTC"} {
		if err := Validate(spec, tz); err == nil {
			t.Errorf("Validate(%q, %q) accepted it", spec, tz)
		}
	}
	if err := Validate("@every 1h", "Europe/Berlin"); err != nil {
		t.Fatal(err)
	}
}

// newFirer is a firer over an isolated database and Redis, submitting export:customers.
func newFirer(t *testing.T, limits config.Schedules) (*Firer, *store.Store, *storetest.Postgres) {
	pg := storetest.NewPostgres(t)
	rd := testenv.NewRedis(t)
	st := store.New(pg.DB)
	logger := slog.New(slog.DiscardHandler)
	sub := jobs.NewSubmitter(st, jobs.NewEnqueuer(asynq.NewClientFromRedisClient(rd.Client), asynq.NewInspectorFromRedisClient(rd.Client), nil),
		map[string]jobs.SubmitPolicy{"export:customers": {Queue: "exports", MaxRetry: 3, TimeoutSeconds: 600, Priority: 5}}, nil, nil, logger, nil)
	types := jobs.NewRegistry()
	types.Register(export.CustomersTaskType(pg.DB, nil, export.Config{}))
	return NewFirer(st, sub, types, limits, logger), st, pg
}

// aliceExports creates alice's schedule of customer exports firing on cron (in UTC).
func aliceExports(t *testing.T, st *store.Store, scheduleNo, cron string) *schedules.Schedule {
	t.Helper()
	sc, err := st.CreateSchedule(context.Background(), schedules.NewSchedule{ScheduleNo: scheduleNo, Owner: "alice", Type: "export:customers",
		Cron: cron, Timezone: "UTC"})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// A fire whose previous run is still going skips (and says so) instead of piling up runs; a
// second fire of the same slot never makes a second task.
func TestFireSkipsWhileThePreviousRunIsGoing(t *testing.T) {
	t.Parallel()
	f, st, _ := newFirer(t, config.Schedules{PauseAfterFailures: 5})
	ctx := context.Background()
	sc := aliceExports(t, st, "sch_1", "@every 1m")
	slot1 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if out, err := f.Fire(ctx, sc, slot1); err != nil || out != "created" {
		t.Fatalf("first fire: %q %v", out, err)
	}
	sc, _ = st.GetScheduleByID(ctx, sc.ID)
	if out, err := f.Fire(ctx, sc, slot1); err != nil || out == "created" {
		t.Fatalf("the same slot again: %q %v", out, err)
	}
	out, err := f.Fire(ctx, sc, slot1.Add(time.Minute))
	if err != nil || !strings.HasPrefix(out, "skipped: the previous run") {
		t.Fatalf("fire while the previous run waits: %q %v", out, err)
	}
	if n, _ := st.Waiting(ctx, "exports", 10); n != 1 {
		t.Fatalf("%d tasks waiting, want 1", n)
	}
	// The run is titled as a submit of the same type titles it, in each language.
	sc, _ = st.GetScheduleByID(ctx, sc.ID)
	run, err := st.Get(ctx, sc.LastTaskNo, store.Scope{Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := run.TitleMessage(); run.Title != "Customers" || m == nil || m.Code != "title.export_customers" {
		t.Errorf("the run is titled %q (%v), want the export's own title", run.Title, m)
	}
	fires, _ := st.ScheduleFires(ctx, sc.ID, 10)
	if len(fires) != 2 {
		t.Fatalf("fires recorded = %+v", fires)
	}
}

func TestCheckIntervalNamesTheMinimum(t *testing.T) {
	t.Parallel()
	for spec, ok := range map[string]bool{
		"@every 1s": false, "* * * * *": false, "0,1 9 * * *": false, "*/4 * * * *": false,
		"@every 5m": true, "*/5 * * * *": true, "0 9 * * 1": true, "@daily": true,
	} {
		err := CheckInterval(spec, "Asia/Shanghai", 5*time.Minute)
		if ok != (err == nil) {
			t.Errorf("CheckInterval(%q) = %v, want ok=%v", spec, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "at most once every 5m0s") {
			t.Errorf("CheckInterval(%q) does not name the minimum: %v", spec, err)
		}
	}
}

// A schedule whose last five runs all failed pauses itself at its next fire, says why, makes
// no sixth task, and runs again once its owner resumes it; a success breaks the streak.
func TestAScheduleWhoseRunsKeepFailingPausesItself(t *testing.T) {
	t.Parallel()
	f, st, pg := newFirer(t, config.Schedules{PauseAfterFailures: 5})
	ctx := context.Background()
	sc := aliceExports(t, st, "sch_f", "@every 1h")
	slot := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	fire := func(end string) string {
		t.Helper()
		sc, _ = st.GetScheduleByID(ctx, sc.ID)
		out, err := f.Fire(ctx, sc, slot)
		if err != nil {
			t.Fatal(err)
		}
		slot = slot.Add(time.Hour)
		if out == "created" {
			sc, _ = st.GetScheduleByID(ctx, sc.ID)
			if _, err := pg.DB.DB.ExecContext(ctx, `UPDATE tasks SET status = $2, error_code = 'bad_params', error_message = 'days must be from 1 to 366',
				finished_at = now() WHERE task_no = $1`, sc.LastTaskNo, end); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	for _, end := range []string{"FAILED", "FAILED", "SUCCESS", "FAILED", "TIMEOUT", "FAILED", "FAILED"} {
		if out := fire(end); out != "created" {
			t.Fatalf("fire before five failures in a row: %q", out)
		}
	}
	if out := fire("FAILED"); out != "created" {
		t.Fatalf("fifth failure in a row: %q", out)
	}
	out := fire("FAILED")
	sc, _ = st.GetScheduleByID(ctx, sc.ID)
	if !strings.HasPrefix(out, "skipped: paused: its last 5 runs failed") || !sc.Paused ||
		!strings.Contains(sc.PausedReason, "FAILED: days must be from 1 to 366") || !strings.Contains(sc.PausedReason, "resume it") {
		t.Fatalf("sixth fire = %q; schedule paused=%v reason=%q", out, sc.Paused, sc.PausedReason)
	}
	var tasks int
	pg.DB.DB.QueryRowContext(ctx, `SELECT count(*) FROM tasks`).Scan(&tasks) //nolint:errcheck
	if tasks != 8 {
		t.Fatalf("%d tasks, want 8: no task once the schedule paused itself", tasks)
	}
	sc, err := st.PauseSchedule(ctx, "sch_f", store.Scope{Owner: "alice"}, false)
	if err != nil || sc.Paused || sc.PausedReason != "" {
		t.Fatalf("resume: %+v %v", sc, err)
	}
	if out := fire("SUCCESS"); out != "created" {
		t.Fatalf("fire after the owner resumed it: %q", out)
	}
}

// An owner keeps at most MaxPerOwner schedules, however many creates race.
func TestAnOwnersSchedulesAreCapped(t *testing.T) {
	t.Parallel()
	_, st, _ := newFirer(t, config.Schedules{})
	ctx := context.Background()
	var wg sync.WaitGroup
	var made, refused atomic.Int32
	for i := range 12 {
		wg.Go(func() {
			_, err := st.CreateSchedule(ctx, schedules.NewSchedule{ScheduleNo: fmt.Sprintf("sch_%d", i), Owner: "alice", Type: "export:customers",
				Cron: "@every 1h", Timezone: "UTC", MaxPerOwner: 3})
			switch {
			case err == nil:
				made.Add(1)
			case errors.Is(err, schedules.ErrTooMany):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if made.Load() != 3 || refused.Load() != 9 {
		t.Fatalf("made %d, refused %d; want 3 and 9", made.Load(), refused.Load())
	}
	if _, err := st.CreateSchedule(ctx, schedules.NewSchedule{ScheduleNo: "sch_bob", Owner: "bob", Type: "export:customers",
		Cron: "@every 1h", Timezone: "UTC", MaxPerOwner: 3}); err != nil {
		t.Fatalf("another owner's schedule: %v", err)
	}
}
