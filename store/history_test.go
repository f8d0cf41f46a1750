package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

// The breakdown counts each rejected row once under every field at fault, most first, ties
// by name; another task's rows and an empty field list count nowhere. The archive's copy
// counts the same.
func TestRejectedRowsAreCountedByField(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task, other := f.Task(), f.Task()
	for i, fields := range []string{"phone", "phone,email", "email,name,level", "phone", "", "level"} {
		f.Exec("INSERT INTO task_items (task_id, row_no, field, message) VALUES (?, ?, ?, 'x')", task.ID, i+2, fields)
	}
	f.Exec("INSERT INTO task_items (task_id, row_no, field, message) VALUES (?, 2, 'name', 'x')", other.ID)
	want := []store.FieldCount{{Field: "phone", Count: 3}, {Field: "email", Count: 2}, {Field: "level", Count: 2}, {Field: "name", Count: 1}}
	got, err := f.S.RejectedByField(ctx, task.ID, false)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("breakdown %+v, %v; want %+v", got, err, want)
	}
	f.Exec("INSERT INTO task_items_archive (id, task_id, row_no, field, message, raw, created_at) SELECT id, task_id, row_no, field, message, raw, created_at FROM task_items WHERE task_id = ?", task.ID)
	if got, err := f.S.RejectedByField(ctx, task.ID, true); err != nil || !slices.Equal(got, want) {
		t.Fatalf("archived breakdown %+v, %v", got, err)
	}
	if got, err := f.S.RejectedByField(ctx, other.ID+1000, false); err != nil || len(got) != 0 {
		t.Fatalf("a task without rejected rows: %+v, %v", got, err)
	}
}

// The log pages back from the newest line by line id, each line with its attempt; a page
// can keep to one attempt; the forward read returns the whole log in order.
func TestTheLogPagesBackByLineAndAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task := f.Task()
	for i := range 7 {
		f.Exec("INSERT INTO task_logs (task_id, attempt, level, message) VALUES (?, ?, 'info', ?)", task.ID, 1+i/4, fmt.Sprintf("line %d", i))
	}
	msgs := func(ls []store.LogEntry) (out []string) {
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%d:%s", l.Attempt, l.Message))
		}
		return out
	}
	page, err := f.S.LogPage(ctx, task.ID, store.LogQuery{Limit: 3})
	if got := msgs(page); err != nil || !slices.Equal(got, []string{"2:line 4", "2:line 5", "2:line 6"}) {
		t.Fatalf("newest page %q, %v", got, err)
	}
	page, _ = f.S.LogPage(ctx, task.ID, store.LogQuery{Limit: 3, Before: page[0].ID})
	if got := msgs(page); !slices.Equal(got, []string{"1:line 1", "1:line 2", "1:line 3"}) {
		t.Fatalf("earlier page %q", got)
	}
	page, _ = f.S.LogPage(ctx, task.ID, store.LogQuery{Limit: 3, Before: page[0].ID})
	if got := msgs(page); !slices.Equal(got, []string{"1:line 0"}) {
		t.Fatalf("earliest page %q", got)
	}
	page, _ = f.S.LogPage(ctx, task.ID, store.LogQuery{Limit: 10, Attempt: 1})
	if got := msgs(page); len(got) != 4 || got[3] != "1:line 3" {
		t.Fatalf("attempt 1 %q", got)
	}
	var all []store.LogEntry
	for after := int64(0); ; {
		ls, err := f.S.LogLines(ctx, task.ID, after, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		all, after = append(all, ls...), ls[len(ls)-1].ID
	}
	if got := msgs(all); len(got) != 7 || got[0] != "1:line 0" || got[6] != "2:line 6" {
		t.Fatalf("whole log %q", got)
	}
}

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
