package cleanup_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

func TestRoundAppliesRetentionWithRunsLogsItemsAndFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	finished := func(age string) (*store.Task, string) {
		tk, p := f.succeeded(time.Hour)
		f.Exec("INSERT INTO task_items (task_id, row_no, field, message) VALUES (?, 2, 'phone', 'bad')", tk.ID)
		f.Exec("UPDATE tasks SET finished_at = now() - ?::interval WHERE id = ?", age, tk.ID)
		return tk, p
	}
	old, oldFile := finished("31 days")
	recent, _ := finished("29 days")
	pending := f.task(`{}`)
	f.Exec("UPDATE tasks SET created_at = now() - interval '90 days' WHERE id = ?", pending.ID)

	if rep := f.cleaner.Round(ctx); rep.RetentionPurged != 1 {
		t.Fatalf("report = %+v", rep)
	}
	if _, err := f.S.GetByID(ctx, old.ID); err == nil || exists(oldFile) {
		t.Fatal("the task past retention, or its file, is still there")
	}
	var orphans int
	f.pg.DB.NewRaw(`SELECT (SELECT count(*) FROM task_runs WHERE task_id = ?) + (SELECT count(*) FROM task_logs WHERE task_id = ?)
		+ (SELECT count(*) FROM task_items WHERE task_id = ?)`, old.ID, old.ID, old.ID).Scan(ctx, &orphans)
	if orphans != 0 {
		t.Fatalf("%d runs/logs/items of the deleted task remain", orphans)
	}
	if _, err := f.S.GetByID(ctx, recent.ID); err != nil {
		t.Fatal("a task within retention was deleted")
	}
	if _, err := f.S.GetByID(ctx, pending.ID); err != nil {
		t.Fatal("an old but unfinished task was deleted")
	}
}
