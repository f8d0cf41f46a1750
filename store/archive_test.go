package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

// Retention archives instead of deleting: the task, its runs, logs and rejected rows move in
// one transaction, a lookup by id still finds it, and the daily stats still count it (live and
// archived tasks alike); purging the archive keeps the stats.
func TestArchivedTaskIsFoundAndCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	done, _ := f.inStatus(store.StatusSuccess)
	failed, _ := f.inStatus(store.StatusFailed)
	live, _ := f.inStatus(store.StatusSuccess)
	f.Exec("INSERT INTO task_items (task_id, row_no, message) VALUES (?, 2, 'phone: bad')", done.ID)
	f.Exec("INSERT INTO task_logs (task_id, level, message) VALUES (?, 'info', 'imported 9 of 10 rows')", done.ID)
	f.Exec("UPDATE tasks SET started_at = finished_at - interval '40 seconds', total_count = 10, success_count = 9, failed_count = 1 WHERE id = ?", done.ID)

	n, err := f.S.ArchiveTasks(ctx, []int64{done.ID, failed.ID})
	if err != nil || n != 2 {
		t.Fatalf("archived %d: %v", n, err)
	}
	if _, err := f.S.Get(ctx, done.TaskNo, store.Scope{Owner: "alice"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the archived task is still live: %v", err)
	}
	got, err := f.S.GetArchived(ctx, done.TaskNo, store.Scope{Owner: "alice"})
	if err != nil || got.Status != store.StatusSuccess || got.SuccessCount != 9 {
		t.Fatalf("archived lookup: %+v %v", got, err)
	}
	if _, err := f.S.GetArchived(ctx, done.TaskNo, store.Scope{Owner: "bob"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("another user found alice's archived task")
	}
	runs, _ := f.S.ArchivedRuns(ctx, done.ID)
	logs, _ := f.S.ArchivedLogs(ctx, done.ID, 10)
	if len(runs) != 1 || len(logs) == 0 || f.Count("SELECT count(*) FROM task_items_archive") != 1 || f.Count("SELECT count(*) FROM task_items") != 0 {
		t.Fatalf("runs %d logs %d moved", len(runs), len(logs))
	}
	// Nothing of an archived task stays behind in the live tables (runs and events have no
	// foreign key to cascade from: ArchiveTasks deletes them itself); the live task keeps its.
	for _, table := range []string{"task_runs", "task_events", "task_logs", "task_items"} {
		if n := f.Count("SELECT count(*) FROM "+table+" WHERE task_id IN (?, ?)", done.ID, failed.ID); n != 0 {
			t.Fatalf("%d rows of archived tasks left in %s", n, table)
		}
	}
	if f.Count("SELECT count(*) FROM task_runs WHERE task_id = ?", live.ID) == 0 || f.Count("SELECT count(*) FROM task_events WHERE task_id = ?", live.ID) == 0 {
		t.Fatal("archiving took the live task's runs or events")
	}

	day := time.Now().UTC().Truncate(24 * time.Hour)
	stats, err := f.S.Stats(ctx, store.StatsFilter{From: day, To: day.Add(24 * time.Hour), GroupBy: []string{"status"}}, store.Scope{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[string]store.StatsRow{}
	for _, r := range stats {
		byStatus[r.Status] = r
	}
	if s := byStatus["SUCCESS"]; s.Tasks != 2 || s.RowsSuccess != 9 || s.P99Seconds != 60 {
		t.Fatalf("SUCCESS stats (one archived, one live %s) = %+v", live.TaskNo, s)
	}
	if byStatus["FAILED"].Tasks != 1 {
		t.Fatalf("stats = %+v", stats)
	}
	// Archive again (idempotent: nothing left), purge, stats stay.
	if n, _ := f.S.ArchiveTasks(ctx, []int64{done.ID}); n != 0 {
		t.Fatalf("archived a task twice: %d", n)
	}
	f.Exec("UPDATE tasks_archive SET archived_at = now() - interval '400 days'")
	if n, err := f.S.PurgeArchive(ctx, 365*24*time.Hour, 100); err != nil || n != 2 {
		t.Fatalf("purged %d: %v", n, err)
	}
	after, _ := f.S.Stats(ctx, store.StatsFilter{From: day, To: day.Add(24 * time.Hour)}, store.Scope{Admin: true})
	if len(after) != 1 || after[0].Tasks != 3 {
		t.Fatalf("stats after purge = %+v", after)
	}
}
