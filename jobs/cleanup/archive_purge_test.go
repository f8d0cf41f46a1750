package cleanup_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/jobs/cleanup"
)

// Archived tasks are deleted, with their archived runs, ArchiveRetention after they were
// archived; younger ones stay, and so do the daily aggregates of both. With no
// ArchiveRetention the archive is kept.
func TestRoundPurgesTheArchivePastItsRetentionAndKeepsTheAggregates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	oldTask, _ := f.succeeded(time.Hour)
	recent, _ := f.succeeded(time.Hour)
	f.Exec("UPDATE tasks SET finished_at = now() - interval '31 days'")
	if rep := f.cleaner.Round(ctx); rep.RetentionPurged != 2 || rep.ArchivePurged != 0 {
		t.Fatalf("report = %+v, want both tasks archived and none purged", rep)
	}
	f.Exec("UPDATE tasks_archive SET archived_at = now() - interval '400 days' WHERE id = ?", oldTask.ID)

	if rep := f.cleaner.Round(ctx); rep.ArchivePurged != 0 || f.Count("SELECT count(*) FROM tasks_archive") != 2 {
		t.Fatalf("report = %+v with no archive retention, want the archive kept", rep)
	}

	cfg := f.cfg
	cfg.ArchiveRetention = 365 * 24 * time.Hour
	if rep := f.cleanerWith(cfg, cleanup.Deps{}).Round(ctx); rep.ArchivePurged != 1 || rep.Errors != 0 {
		t.Fatalf("report = %+v, want the task archived 400 days ago purged", rep)
	}
	if n := f.Count("SELECT count(*) FROM tasks_archive WHERE id = ?", recent.ID); n != 1 {
		t.Fatal("the task archived just now was purged")
	}
	if n := f.Count("SELECT count(*) FROM tasks_archive WHERE id = ?", oldTask.ID) +
		f.Count("SELECT count(*) FROM task_runs_archive WHERE task_id = ?", oldTask.ID); n != 0 {
		t.Fatalf("%d rows of the purged task remain in the archive", n)
	}
	if n := f.Count("SELECT coalesce(sum(tasks), 0) FROM task_stats_daily"); n != 2 {
		t.Fatalf("the daily aggregates count %d tasks after the purge, want both", n)
	}
}
