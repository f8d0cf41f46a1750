package cleanup_test

import (
	"context"
	"slices"
	"testing"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
)

func TestRoundReenqueuesOrphansIdempotentlyAndBoundedly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	ctx := context.Background()
	var ids []int64
	for range 5 {
		tk := f.task(`{}`)
		ids = append(ids, tk.ID)
	}
	f.Exec("UPDATE tasks SET enqueued_at = NULL")
	fresh := f.task(`{}`) // enqueued just now: inside the grace period

	if counts := perRound(f.cleaner, 4, func(r cleanup.Report) int { return r.Orphans }); !slices.Equal(counts, []int{2, 2, 1, 0}) {
		t.Fatalf("orphans per round = %v, want 2,2,1,0 (bounded by the batch size)", counts)
	}
	info, err := f.insp.GetQueueInfo("exports")
	if err != nil || info.Pending != 5 {
		t.Fatalf("asynq pending = %+v (%v), want the 5 orphans", info, err)
	}
	// Past the grace again: enqueueing again is a no-op (asynq still holds one job each), and
	// a no-op is not counted as an orphan.
	f.Exec("UPDATE tasks SET enqueued_at = now() - interval '2 minutes' WHERE id IN (?)", ids[0])
	if n := f.cleaner.Round(ctx).Orphans; n != 0 {
		t.Fatalf("second hand-off counted %d orphans, want 0 (asynq held the job)", n)
	}
	if info, _ := f.insp.GetQueueInfo("exports"); info.Pending != 5 {
		t.Fatalf("asynq pending after a repeat = %d, want still 5", info.Pending)
	}
	if _, err := f.insp.GetTaskInfo("exports", jobs.JobID(fresh.TaskNo, 0)); err == nil {
		t.Fatal("a task inside its grace period was enqueued by the round (the test never enqueued it)")
	}
}
