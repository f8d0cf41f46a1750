package importer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// submitMode stores the file as an upload and creates its import task in mode, dry or not.
func (w *world) submitMode(name string, content []byte, mode string, dry bool) *store.Task {
	w.t.Helper()
	p := w.upload(name, content)
	p.Mode, p.DryRun = mode, dry
	return w.createImport(p)
}

// result is a finished import's result.
func (w *world) result(task *store.Task) ResultData {
	w.t.Helper()
	var res ResultData
	if err := json.Unmarshal(task.Result, &res); err != nil {
		w.t.Fatalf("result %s: %v", task.Result, err)
	}
	return res
}

// csvOf is a customer CSV of the rows given as "code,name,phone".
func csvOf(rows ...string) []byte {
	return []byte("code,name,phone\n" + strings.Join(rows, "\n") + "\n")
}

// phone is a valid phone number for n.
func phone(n int) string { return fmt.Sprintf("138%08d", n) }

// customerRows reads every customer as "code name phone task", in code order.
func (w *world) customerRows() []string {
	w.t.Helper()
	rows, err := w.pg.DB.QueryContext(context.Background(), `SELECT code, name, phone, coalesce(last_import_task_id, 0) FROM customers ORDER BY code`)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var code, name, ph string
		var task int64
		if err := rows.Scan(&code, &name, &ph, &task); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %s %d", code, name, ph, task))
	}
	return out
}

// The summary splits the rows written into inserted, updated and unchanged, exactly, across
// batches and in every mode.
func TestSummaryCountsInsertedUpdatedUnchanged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 3})
	first := w.deliver(w.submitMode("a.csv", customersCSV("K", 10), ModeUpsert, false))
	if s := w.result(first).Summary; first.Status != store.StatusSuccess || s.Inserted != 10 || s.Updated != 0 || s.Unchanged != 0 || s.Removed != 0 {
		t.Fatalf("first import: %s %+v, want 10 inserted", first.Status, s)
	}
	// K1..K4 renamed, K5..K10 as they were, K11, K12 new, K3 twice (rejected).
	var rows []string
	for i := 1; i <= 12; i++ {
		name := fmt.Sprintf("name %d", i)
		if i <= 4 {
			name = "renamed"
		}
		rows = append(rows, fmt.Sprintf("K%d,%s,%s", i, name, phone(i)))
	}
	rows = append(rows, "K3,again,"+phone(3))
	second := w.deliver(w.submitMode("b.csv", csvOf(rows...), ModeUpsert, false))
	s := w.result(second).Summary
	if second.Status != store.StatusPartialSuccess || s.Total != 13 || s.Success != 12 || s.Failed != 1 ||
		s.Inserted != 2 || s.Updated != 4 || s.Unchanged != 6 {
		t.Fatalf("second import: %s %+v, want 13 rows: 2 inserted, 4 updated, 6 unchanged, 1 failed", second.Status, s)
	}
	if !strings.Contains(w.logs(second), "2 inserted, 4 updated, 6 unchanged") {
		t.Fatalf("the log does not give the split:\n%s", w.logs(second))
	}
	// Every row of the file carries the import, unchanged ones too.
	if n := w.count("SELECT count(*) FROM customers WHERE last_import_task_id = ?", second.ID); n != 12 {
		t.Fatalf("%d customers stamped by the second import, want 12", n)
	}
	third := w.deliver(w.submitMode("c.csv", csvOf("K1,x,"+phone(1), "K99,y,"+phone(99)), ModeInsert, false))
	if s := w.result(third).Summary; s.Inserted != 1 || s.Updated != 0 || s.Unchanged != 0 || s.Failed != 1 {
		t.Fatalf("insert mode: %+v, want 1 inserted and 1 failed", s)
	}
}

// A replace removes the customers its file does not hold only when every row was accepted:
// one rejected row and nothing is removed, and the result says why. (Flipping the condition
// in mayRemove fails this test.)
func TestReplaceRemovesNothingWhenARowWasRejected(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 4})
	w.deliver(w.submitMode("all.csv", customersCSV("R", 10), ModeUpsert, false))

	var rows []string
	for i := 1; i <= 5; i++ {
		rows = append(rows, fmt.Sprintf("R%d,name %d,%s", i, i, phone(i)))
	}
	rejected := w.deliver(w.submitMode("bad.csv", csvOf(append(rows, "R6,no phone,")...), ModeReplace, false))
	res := w.result(rejected)
	if rejected.Status != store.StatusPartialSuccess || res.Summary.Removed != 0 || res.NothingRemoved != "nothing removed: 1 rows were rejected" ||
		!strings.Contains(w.logs(rejected), "nothing removed: 1 rows were rejected") {
		t.Fatalf("replace with a rejected row: %s, %+v, %q", rejected.Status, res.Summary, res.NothingRemoved)
	}
	if n := w.count("SELECT count(*) FROM customers"); n != 10 {
		t.Fatalf("%d customers after a replace with a rejected row, want all 10 kept", n)
	}
	if n := w.count("SELECT count(*) FROM import_codes"); n != 0 {
		t.Fatalf("%d codes left behind", n)
	}

	whole := w.deliver(w.submitMode("good.csv", csvOf(rows...), ModeReplace, false))
	res = w.result(whole)
	if whole.Status != store.StatusSuccess || res.Summary.Removed != 5 || res.Summary.Unchanged != 5 || res.NothingRemoved != "" ||
		!strings.Contains(w.logs(whole), "removed 5 customers not in the file") {
		t.Fatalf("replace with every row accepted: %s, %+v, %q", whole.Status, res.Summary, res.NothingRemoved)
	}
	if got := w.customerRows(); len(got) != 5 || !strings.HasPrefix(got[0], "R1 ") || !strings.HasPrefix(got[4], "R5 ") {
		t.Fatalf("customers after the replace: %q, want R1..R5", got)
	}
	if n := w.count("SELECT count(*) FROM import_before_images WHERE task_id = ? AND removed", whole.ID); n != 5 {
		t.Fatalf("%d before-images of removed customers, want 5", n)
	}
}

// A replace whose sheet is cut short at the row limit removes nothing: the customers after
// the limit were never read.
func TestReplaceCutShortRemovesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 5, Limits: sheet.Limits{MaxRows: 50}})
	w.deliver(w.submitMode("seed.csv", customersCSV("Z", 3), ModeUpsert, false))
	var gap strings.Builder
	gap.WriteString(`<worksheet><sheetData>` + headerRow)
	for i := 2; i <= 11; i++ {
		fmt.Fprintf(&gap, `<row r="%d"><c t="inlineStr"><is><t>G%d</t></is></c><c t="inlineStr"><is><t>n</t></is></c><c><v>138%08d</v></c></row>`, i, i, i)
	}
	gap.WriteString(`<row r="100"><c t="inlineStr"><is><t>G100</t></is></c><c t="inlineStr"><is><t>n</t></is></c><c><v>13800000100</v></c></row></sheetData></worksheet>`)
	task := w.deliver(w.submitMode("gap.xlsx", workbookOf(t, gap.String()), ModeReplace, false))
	res := w.result(task)
	if task.Status != store.StatusPartialSuccess || res.Summary.Removed != 0 || res.NothingRemoved != "nothing removed: the file was not read to its end" {
		t.Fatalf("cut short: %s %+v %q", task.Status, res.Summary, res.NothingRemoved)
	}
	if n := w.count("SELECT count(*) FROM customers WHERE code LIKE 'Z%'"); n != 3 {
		t.Fatalf("%d of the 3 customers not in the file kept, want 3", n)
	}
}

// The replace's last step runs exactly once: an attempt killed after it committed leaves it
// done for the next (which reports what it removed and removes nothing more), one that dies
// inside it leaves nothing of it, and a superseded attempt cannot run it at all.
func TestReplaceLastStepRunsExactlyOnce(t *testing.T) {
	t.Parallel()
	type world2 struct {
		*world
		file []byte
	}
	setup := func(t *testing.T) world2 {
		w := newWorld(t, Config{BatchSize: 4})
		w.deliver(w.submitMode("seed.csv", customersCSV("S", 12), ModeUpsert, false))
		return world2{w, customersCSV("S", 7)} // S8..S12 are to go
	}
	check := func(t *testing.T, w world2, task *store.Task) {
		t.Helper()
		res := w.result(task)
		if task.Status != store.StatusSuccess || res.Summary.Removed != 5 || res.Summary.Unchanged != 7 {
			t.Fatalf("%s %+v, want SUCCESS with 7 unchanged and 5 removed", task.Status, res.Summary)
		}
		if got := w.customerRows(); len(got) != 7 {
			t.Fatalf("customers: %q, want S1..S7", got)
		}
		if n := w.count("SELECT count(*) FROM import_before_images WHERE task_id = ? AND removed", task.ID); n != 5 {
			t.Fatalf("%d before-images of removed customers, want 5", n)
		}
		if n := w.count("SELECT count(*) FROM import_codes"); n != 0 {
			t.Fatalf("%d codes left", n)
		}
	}
	// resume lets the runtime take over the attempt that was cut off.
	resume := func(w world2, task *store.Task) *store.Task {
		w.t.Helper()
		if _, err := w.pg.DB.ExecContext(context.Background(), `UPDATE tasks SET heartbeat_at = now() - interval '1 day' WHERE id = ?`, task.ID); err != nil {
			w.t.Fatal(err)
		}
		return w.deliver(storetestGet(w.world, task.ID))
	}

	t.Run("killed after the removal committed", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		w.im.afterLastStep = func(ctx context.Context, run *jobs.Run) {
			// The worker dies here: another takes the task over before this one finishes.
			if _, err := w.st.ClaimTask(ctx, run.Lease.TaskID, "other", 0); err != nil {
				t.Error(err)
			}
		}
		task := w.deliver(w.submitMode("seven.csv", w.file, ModeReplace, false))
		if task.Status != store.StatusRunning || len(w.customerRows()) != 7 {
			t.Fatalf("after the kill: %s with %d customers, want RUNNING with the removal committed", task.Status, len(w.customerRows()))
		}
		w.im.afterLastStep = nil
		check(t, w, resume(w, task))
	})
	t.Run("dying inside the removal", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		calls := 0
		w.im.inLastStep = func(ctx context.Context, run *jobs.Run) error {
			calls++
			if calls == 1 {
				return fmt.Errorf("connection lost")
			}
			return nil
		}
		task := w.deliver(w.submitMode("seven.csv", w.file, ModeReplace, false))
		if task.Status != store.StatusRetryWait || len(w.customerRows()) != 12 {
			t.Fatalf("after dying inside the step: %s with %d customers, want RETRY_WAIT with all 12", task.Status, len(w.customerRows()))
		}
		if _, err := w.pg.DB.ExecContext(context.Background(), `UPDATE tasks SET next_retry_at = now() WHERE id = ?`, task.ID); err != nil {
			t.Fatal(err)
		}
		check(t, w, w.deliver(task))
	})
	t.Run("superseded before the step", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		w.im.afterCommit = func(ctx context.Context, run *jobs.Run, n int) {
			if n == 2 { // the last batch: another worker takes over before the removal
				if _, err := w.st.ClaimTask(ctx, run.Lease.TaskID, "other", 0); err != nil {
					t.Error(err)
				}
			}
		}
		task := w.deliver(w.submitMode("seven.csv", w.file, ModeReplace, false))
		if len(w.customerRows()) != 12 {
			t.Fatalf("a superseded attempt removed customers: %d left", len(w.customerRows()))
		}
		w.im.afterCommit = nil
		check(t, w, resume(w, task))
	})
}

func storetestGet(w *world, id int64) *store.Task {
	w.t.Helper()
	task, err := w.st.GetByID(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return task
}

// snapshot is every customer with its row version (xmin): a write of any kind changes it.
func (w *world) snapshot() string {
	w.t.Helper()
	rows, err := w.pg.DB.QueryContext(context.Background(), `SELECT code || ':' || xmin::text FROM customers ORDER BY code`)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		rows.Scan(&s) //nolint:errcheck
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// A dry run writes nothing (every customer keeps its row version) and ends with the counts,
// the rejected rows and the error report the real run of the same file then gives, in every
// mode: duplicates across batches, existing codes in insert mode, and what a replace would
// remove are all found.
func TestDryRunWritesNothingAndForetellsTheRealRun(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{ModeUpsert, ModeInsert, ModeReplace} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, Config{BatchSize: 3})
			w.deliver(w.submitMode("seed.csv", customersCSV("D", 8), ModeUpsert, false))
			file := csvOf("D1,name 1,"+phone(1), "D2,changed,"+phone(2), "N1,new,"+phone(101), "D3,name 3,"+phone(3),
				"N1,again,"+phone(102), "N2,bad phone,12", "D2,third,"+phone(2), "N3,new,"+phone(103))
			before := w.snapshot()
			dry := w.deliver(w.submitMode("f.csv", file, mode, true))
			if after := w.snapshot(); after != before {
				t.Fatalf("the dry run wrote customers:\nbefore %s\nafter  %s", before, after)
			}
			if n := w.count("SELECT count(*) FROM import_codes") + w.count("SELECT count(*) FROM import_before_images WHERE task_id = ?", dry.ID); n != 0 {
				t.Fatalf("the dry run left %d codes or before-images", n)
			}
			dres := w.result(dry)
			if !dres.DryRun || !strings.Contains(w.logs(dry), "dry run, nothing was written") {
				t.Fatalf("dry run result %s, log:\n%s", dry.Result, w.logs(dry))
			}
			real := w.deliver(w.submitMode("f.csv", file, mode, false))
			rres := w.result(real)
			dres.DryRun, dres.ErrorReport, dres.ErrorReportName, rres.ErrorReport, rres.ErrorReportName = false, "", "", "", ""
			if mode == ModeReplace {
				dres.NothingRemoved = strings.Replace(dres.NothingRemoved, "would be removed", "removed", 1)
				if m := dres.NothingRemovedMessage; m == nil || m.Code != "nothing_removed.dry_rejected" {
					t.Fatalf("the dry run says why nothing would be removed as %+v", m)
				}
				dres.NothingRemovedMessage.Code = "nothing_removed.rejected"
			}
			dj, _ := json.Marshal(dres)
			rj, _ := json.Marshal(rres)
			if dry.Status != real.Status || string(dj) != string(rj) {
				t.Fatalf("dry run %s %s\nreal run %s %s", dry.Status, dj, real.Status, rj)
			}
			if d, r := w.outcome(dry), w.outcome(real); fmt.Sprint(d.items) != fmt.Sprint(r.items) {
				t.Fatalf("rejected rows differ:\ndry  %v\nreal %v", d.items, r.items)
			}
			if want := map[string]int64{ModeInsert: 6}[mode]; dres.Summary.Failed != cmp.Or(want, 3) {
				t.Fatalf("%+v, want %d rejected (N1 twice, D2 twice, a bad phone; in insert mode D1, D2, D3 exist)", dres.Summary, cmp.Or(want, 3))
			}
		})
	}
	// A dry replace whose every row is accepted says how many customers it would remove.
	t.Run("replace counts what it would remove", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, Config{BatchSize: 2})
		w.deliver(w.submitMode("seed.csv", customersCSV("E", 6), ModeUpsert, false))
		before := w.snapshot()
		dry := w.deliver(w.submitMode("f.csv", customersCSV("E", 2), ModeReplace, true))
		if s := w.result(dry).Summary; s.Removed != 4 || w.snapshot() != before || !strings.Contains(w.logs(dry), "4 customers not in the file would be removed") {
			t.Fatalf("dry replace: %+v, log:\n%s", s, w.logs(dry))
		}
	})
}

// The form's dry_run and mode=replace are read as the uploader means them, a value that is
// neither is refused naming the field, and a dry run is a task of its own: the real import of
// the same file is not its duplicate.
func TestSubmitReadsDryRunAndReplace(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]bool{"true": true, "1": true, "on": true, "TRUE": true, "false": false, "0": false, "off": false} {
		var s Submit
		if err := s.Set("dry_run", value); err != nil || s.DryRun != want {
			t.Errorf("dry_run=%s: %v, %v; want %v", value, s.DryRun, err, want)
		}
	}
	var s Submit
	var fp *FileProblem
	if err := s.Set("dry_run", "maybe"); !errors.As(err, &fp) || fp.Code != "bad_dry_run" || fp.Field != "dry_run" {
		t.Errorf("dry_run=maybe: %v", err)
	}
	if err := s.Set("mode", "Replace"); err != nil || s.Mode != ModeReplace {
		t.Errorf("mode=Replace: %q %v", s.Mode, err)
	}
	if err := s.Set("mode", "merge"); !errors.As(err, &fp) || fp.Message != `mode must be upsert, insert or replace, not "merge"` {
		t.Errorf("mode=merge: %v", err)
	}

	w := newWorld(t, Config{})
	file := customersCSV("Q", 2)
	dry, dsub, err := w.submitAs("q.csv", file, Submit{Mode: ModeReplace, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	real, rsub, err := w.submitAs("q.csv", file, Submit{Mode: ModeReplace})
	if err != nil {
		t.Fatal(err)
	}
	var p Params
	json.Unmarshal(dry.Params, &p) //nolint:errcheck
	if dsub.key == rsub.key || dry.ID == real.ID || !p.DryRun || p.TitleMessage().English() != "Import q.csv (replace) (dry run)" {
		t.Fatalf("dry key %q, real key %q, params %s", dsub.key, rsub.key, dry.Params)
	}
}
