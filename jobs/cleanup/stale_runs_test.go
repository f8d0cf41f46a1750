package cleanup_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

func TestRoundTimesOutStaleRunsAndDeletesTheirPartialFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	dead, _ := f.running("gone")
	partial := f.file(storage.ScratchDir+"/"+dead.TaskNo+"-123.xlsx", time.Minute)
	f.Exec("UPDATE tasks SET heartbeat_at = now() - interval '11 minutes' WHERE id = ?", dead.ID)

	slow, _ := f.running("slow") // silent, but within its timeout: left to a takeover
	f.Exec("UPDATE tasks SET heartbeat_at = now() - interval '5 minutes', enqueued_at = now() - interval '1 hour' WHERE id = ?", slow.ID)

	rep := f.cleaner.Round(ctx)
	if rep.TimedOut != 1 || rep.Takeovers != 1 || rep.Errors != 0 {
		t.Fatalf("report = %+v, want one timed out and one re-delivered", rep)
	}
	if got := f.Get(dead.ID); got.Status != store.StatusTimeout || got.ErrorCode != "timeout" {
		t.Fatalf("dead task = %s %s", got.Status, got.ErrorCode)
	}
	if exists(partial) {
		t.Fatal("the timed-out task's partial file is still there")
	}
	runs, _ := f.S.Runs(ctx, dead.ID)
	if len(runs) != 1 || runs[0].Status != "TIMEOUT" || runs[0].FinishedAt == nil {
		t.Fatalf("runs = %+v", runs)
	}
	if got := f.Get(slow.ID); got.Status != store.StatusRunning {
		t.Fatalf("slow task = %s, want still RUNNING (to be taken over)", got.Status)
	}
	if _, err := f.insp.GetTaskInfo(jobs.Lane(f.Get(slow.ID)), jobs.JobID(slow.TaskNo, 1)); err != nil {
		t.Fatalf("the silent task was not handed to asynq for a takeover: %v", err)
	}
}
