package schedule

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/schedules"
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

// A fire whose previous run is still going skips (and says so) instead of piling up runs; a
// second fire of the same slot never makes a second task.
func TestFireSkipsWhileThePreviousRunIsGoing(t *testing.T) {
	t.Parallel()
	pg := testenv.NewPostgres(t)
	rd := testenv.NewRedis(t)
	st := store.New(pg.DB)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sub := jobs.NewSubmitter(st, jobs.NewEnqueuer(asynq.NewClientFromRedisClient(rd.Client), asynq.NewInspectorFromRedisClient(rd.Client), nil),
		map[string]jobs.SubmitPolicy{"export:customers": {Queue: "exports", MaxRetry: 3, TimeoutSeconds: 600, Priority: 5}}, nil, nil, logger, nil)
	f := NewFirer(st, sub, logger)
	ctx := context.Background()
	sc, err := st.CreateSchedule(ctx, schedules.NewSchedule{ScheduleNo: "sch_1", Owner: "alice", Type: "export:customers", Cron: "@every 1m", Timezone: "UTC"})
	if err != nil {
		t.Fatal(err)
	}
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
	fires, _ := st.ScheduleFires(ctx, sc.ID, 10)
	if len(fires) != 2 {
		t.Fatalf("fires recorded = %+v", fires)
	}
}
