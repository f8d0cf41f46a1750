package main

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/schedules"
)

// Two schedulers fire the same "@every 2s" schedule for a while: each slot yields exactly one
// task, created through the normal submit path and run to the end. Pausing stops the fires;
// a deleted schedule never fires again.
func TestTwoSchedulersFireEachScheduleSlotOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"TASKCENTER_CLEANUP_SCHEDULE_SYNC": "1s", "TASKCENTER_CLEANUP_SPEC": "@every 1m"})
	st := store.New(e.pg.DB)
	ctx := context.Background()
	sc, err := st.CreateSchedule(ctx, schedules.NewSchedule{ScheduleNo: "sch_every2s", Owner: "alice", Type: "export:customers",
		Params: []byte(`{"filter":{}}`), Cron: "@every 2s", Timezone: "UTC"})
	if err != nil {
		t.Fatal(err)
	}
	e.start("scheduler,worker")
	e.start("scheduler,worker")
	testenv.Eventually(t, 40*time.Second, "five slots fired", func() bool {
		return e.count("SELECT count(*) FROM schedule_fires WHERE task_no IS NOT NULL") >= 5
	})
	tasks := e.count("SELECT count(*) FROM tasks WHERE biz_key LIKE 'schedule:sch_every2s:%'")
	slots := e.count("SELECT count(DISTINCT biz_key) FROM tasks WHERE biz_key LIKE 'schedule:sch_every2s:%'")
	if tasks != slots || tasks < 5 {
		t.Fatalf("%d tasks for %d slots: a slot fired twice", tasks, slots)
	}
	testenv.Eventually(t, 30*time.Second, "the scheduled exports to finish", func() bool {
		return e.count("SELECT count(*) FROM tasks WHERE biz_key LIKE 'schedule:%' AND status <> 'SUCCESS'") == 0
	})

	if _, err := st.PauseSchedule(ctx, sc.ScheduleNo, store.Scope{Admin: true}, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // one sync: the schedulers drop the paused schedule
	paused := e.count("SELECT count(*) FROM tasks WHERE biz_key LIKE 'schedule:%'")
	time.Sleep(5 * time.Second)
	if after := e.count("SELECT count(*) FROM tasks WHERE biz_key LIKE 'schedule:%'"); after != paused {
		t.Fatalf("a paused schedule created %d tasks", after-paused)
	}
	if _, err := st.PauseSchedule(ctx, sc.ScheduleNo, store.Scope{Admin: true}, false); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "a fire after resuming", func() bool {
		return e.count("SELECT count(*) FROM tasks WHERE biz_key LIKE 'schedule:%'") > paused
	})
	if err := st.DeleteSchedule(ctx, sc.ScheduleNo, store.Scope{Admin: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	deleted := e.count("SELECT count(*) FROM tasks WHERE biz_key LIKE 'schedule:%'")
	time.Sleep(5 * time.Second)
	if after := e.count("SELECT count(*) FROM tasks WHERE biz_key LIKE 'schedule:%'"); after != deleted {
		t.Fatalf("a deleted schedule created %d tasks", after-deleted)
	}
}
