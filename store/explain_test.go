package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
