package importer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// undo submits and runs the undo of imp, as POST /api/v1/tasks/{id}/undo and a worker would.
func (w *world) undo(imp *store.Task) *store.Task {
	w.t.Helper()
	sub, err := UndoSubmission(imp, time.Hour, time.Now())
	if err != nil {
		w.t.Fatalf("undo of %s refused: %v", imp.TaskNo, err)
	}
	task := w.create(w.t, sub)
	rt := w.jw.Runtime(NewUndoer(w.st, w.fs, Config{BatchSize: 2, ReportTTL: time.Hour}), jobs.TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Minute})
	return w.jw.Deliver(rt, task)
}

// An undo restores what the import changed and deletes what it inserted, but leaves alone a
// customer a later import changed again: that one is a conflict in the undo's error report,
// counted as failed, and keeps the later import's values.
func TestUndoAfterALaterImportReportsTheConflicts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 3})
	seed := w.deliver(w.submitMode("seed.csv", customersCSV("U", 6), ModeUpsert, false))
	imp := w.deliver(w.submitMode("change.csv", csvOf("U1,one,"+phone(1), "U2,two,"+phone(2), "U3,three,"+phone(3),
		"U4,name 4,"+phone(4), "U7,seven,"+phone(7), "U8,eight,"+phone(8)), ModeUpsert, false))
	if s := w.result(imp).Summary; s.Updated != 3 || s.Inserted != 2 || s.Unchanged != 1 {
		t.Fatalf("the import: %+v", s)
	}
	later := w.deliver(w.submitMode("later.csv", csvOf("U2,later,"+phone(2), "U8,later,"+phone(8)), ModeUpsert, false))

	undo := w.undo(imp)
	res := w.result(undo)
	if undo.Status != store.StatusPartialSuccess || undo.TotalCount != 5 || undo.SuccessCount != 3 || undo.FailedCount != 2 || res.Undoes != imp.TaskNo {
		t.Fatalf("undo: %s %d/%d/%d %s, want PARTIAL_SUCCESS with 5 rows: 3 restored, 2 conflicts", undo.Status, undo.TotalCount, undo.SuccessCount, undo.FailedCount, undo.Result)
	}
	want := []string{
		fmt.Sprintf("U1 name 1 %s %d", phone(1), seed.ID),
		fmt.Sprintf("U2 later %s %d", phone(2), later.ID),
		fmt.Sprintf("U3 name 3 %s %d", phone(3), seed.ID),
		fmt.Sprintf("U4 name 4 %s %d", phone(4), imp.ID), // unchanged by the import: only its provenance moved
		fmt.Sprintf("U5 name 5 %s %d", phone(5), seed.ID),
		fmt.Sprintf("U6 name 6 %s %d", phone(6), seed.ID),
		fmt.Sprintf("U8 later %s %d", phone(8), later.ID),
	}
	if got := w.customerRows(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("customers after the undo:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	items := w.outcome(undo).items
	if len(items) != 2 || items[3] != "code | code: U2 was changed after the import; left as it is" ||
		items[7] != "code | code: U8 was changed after the import; left as it is" || res.ErrorReport == "" {
		t.Fatalf("conflicts %v, report %q", items, res.ErrorReport)
	}
	if _, err := w.fs.Stat(context.Background(), res.ErrorReport); err != nil {
		t.Fatalf("the undo's error report: %v", err)
	}
}

// The undo of a replace puts back the customers it removed, with their ids; one added again
// since is a conflict.
func TestUndoOfAReplaceRestoresTheRemovedCustomers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 2})
	w.deliver(w.submitMode("seed.csv", customersCSV("V", 5), ModeUpsert, false))
	ids := w.count("SELECT sum(id) FROM customers")
	before := w.customerRows()
	replace := w.deliver(w.submitMode("two.csv", customersCSV("V", 2), ModeReplace, false))
	if len(w.customerRows()) != 2 || w.result(replace).Summary.Removed != 3 {
		t.Fatalf("the replace left %q", w.customerRows())
	}
	undo := w.undo(replace)
	if undo.Status != store.StatusSuccess || undo.SuccessCount != 3 || undo.FailedCount != 0 {
		t.Fatalf("undo: %s %d/%d", undo.Status, undo.SuccessCount, undo.FailedCount)
	}
	after := w.customerRows()
	// V1 and V2 were unchanged by the replace: their values are as before; only the removed
	// rows had a before-image, and they are back as they were, ids included.
	for i := 2; i < 5; i++ {
		if after[i] != before[i] {
			t.Fatalf("restored %q, want %q", after[i], before[i])
		}
	}
	if n := w.count("SELECT sum(id) FROM customers"); n != ids || len(after) != 5 {
		t.Fatalf("ids after the undo sum to %d, want %d (the same rows)", n, ids)
	}

	// A second replace removes V3..V5 again; V4 is imported again before the undo.
	replace2 := w.deliver(w.submitMode("two-again.csv", csvOf("V1,x,"+phone(1), "V2,name 2,"+phone(2)), ModeReplace, false))
	w.deliver(w.submitMode("v4.csv", csvOf("V4,back,"+phone(4)), ModeUpsert, false))
	undo2 := w.undo(replace2)
	if undo2.SuccessCount != 3 || undo2.FailedCount != 1 || w.outcome(undo2).items[0] != "code | code: V4 was added again after the import removed it; left as it is" {
		t.Fatalf("undo of the second replace: %d/%d %v", undo2.SuccessCount, undo2.FailedCount, w.outcome(undo2).items)
	}
}

// What cannot be undone is refused with a reason a person can act on.
func TestUndoRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 10})
	imp := w.deliver(w.submitMode("a.csv", customersCSV("W", 2), ModeUpsert, false))
	dry := w.deliver(w.submitMode("a.csv", customersCSV("W", 2), ModeUpsert, true))
	undo := w.undo(imp)
	pending := w.submitMode("b.csv", customersCSV("X", 2), ModeUpsert, false)
	for _, c := range []struct {
		name string
		task *store.Task
		now  time.Time
		code string
		says string
	}{
		{"an undo", undo, time.Now(), "undo_of_undo", "an undo cannot be undone; import the file again"},
		{"a dry run", dry, time.Now(), "undo_of_dry_run", "a dry run wrote nothing"},
		{"an import not finished", pending, time.Now(), "import_not_finished", "this one is PENDING"},
		{"an expired before-image", imp, time.Now().Add(2 * time.Hour), "undo_expired", "kept for 1h0m0s after it ends"},
	} {
		_, err := UndoSubmission(c.task, time.Hour, c.now)
		var refused *UndoRefused
		if !errors.As(err, &refused) || refused.Code != c.code || !strings.Contains(refused.Message, c.says) {
			t.Errorf("undo of %s: %v, want %s saying %q", c.name, err, c.code, c.says)
		}
	}
}

// A cancelled undo stops between batches with every batch whole, and a retry resumes it after
// the last one: every customer restored once, the counts exact.
func TestUndoCancelledMidwayResumesExactly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 10})
	w.deliver(w.submitMode("seed.csv", customersCSV("Y", 6), ModeUpsert, false))
	var rows []string
	for i := 1; i <= 6; i++ {
		rows = append(rows, fmt.Sprintf("Y%d,changed,%s", i, phone(i)))
	}
	imp := w.deliver(w.submitMode("change.csv", csvOf(rows...), ModeUpsert, false))
	sub, err := UndoSubmission(imp, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	task := w.create(t, sub)
	u := NewUndoer(w.st, w.fs, Config{BatchSize: 2, ReportTTL: time.Hour})
	u.afterCommit = func(ctx context.Context, run *jobs.Run, n int) {
		if n == 1 {
			if _, err := w.st.Cancel(ctx, run.Lease.TaskNo, store.Scope{Admin: true}); err != nil {
				t.Error(err)
			}
		}
	}
	rt := w.jw.Runtime(u, jobs.TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Minute})
	undo := w.jw.Deliver(rt, task)
	restored := w.count("SELECT count(*) FROM customers WHERE name LIKE 'name %'")
	if undo.Status != store.StatusCancelled || undo.SuccessCount != 4 || restored != 4 {
		t.Fatalf("cancelled undo: %s with %d restored (%d in the table), want CANCELLED after two whole batches (4)", undo.Status, undo.SuccessCount, restored)
	}
	if _, err := w.st.Retry(context.Background(), undo.TaskNo, store.Scope{Admin: true}); err != nil {
		t.Fatal(err)
	}
	u.afterCommit = nil
	undo = w.jw.Deliver(rt, storetestGet(w, undo.ID))
	if undo.Status != store.StatusSuccess || undo.TotalCount != 6 || undo.SuccessCount != 6 || undo.FailedCount != 0 ||
		w.count("SELECT count(*) FROM customers WHERE name LIKE 'name %'") != 6 {
		t.Fatalf("resumed undo: %s %d/%d/%d", undo.Status, undo.TotalCount, undo.SuccessCount, undo.FailedCount)
	}
}
