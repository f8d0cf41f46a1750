package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
)

// badPhonesCSV is a header and n rows whose phone is not a phone number, with blank rows
// between them (blank rows are not rows: they count nowhere).
func badPhonesCSV(n int) []byte {
	var b bytes.Buffer
	b.WriteString("code,name,phone\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "B%d,name %d,12345\n", i, i)
		if i%5 == 0 {
			b.WriteString(",,\n")
		}
	}
	return b.Bytes()
}

// An import that read every row and accepted none has failed, whatever it counted: FAILED
// with all_rows_rejected, the error report offered, no retry, and its counts and progress
// telling one total.
func TestAnImportWhoseEveryRowIsRejectedFails(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 4})
	got := w.deliver(w.submit("bad.csv", badPhonesCSV(15)))
	if got.Status != store.StatusFailed || got.ErrorCode != task.CodeAllRowsRejected {
		t.Fatalf("15 of 15 rows rejected ended %s %q, want FAILED %q", got.Status, got.ErrorCode, task.CodeAllRowsRejected)
	}
	if !strings.Contains(got.ErrorMessage, "all 15 rows were rejected") {
		t.Fatalf("error message %q does not say what happened", got.ErrorMessage)
	}
	if got.TotalCount != 15 || got.SuccessCount != 0 || got.FailedCount != 15 || got.ProgressCurrent != 15 || got.ProgressTotal != 15 {
		t.Fatalf("counts %d/%d/%d, progress %d/%d; want 15/0/15 and 15/15", got.TotalCount, got.SuccessCount, got.FailedCount,
			got.ProgressCurrent, got.ProgressTotal)
	}
	r, ok := parseResult(got)
	if !ok || r.ErrorReport == "" || len(r.FirstErrors) == 0 {
		t.Fatalf("result %s: want the error report and the first errors", got.Result)
	}
	if task.CanRetry(got.Status, got.ErrorCode) {
		t.Fatal("the task is offered a retry that would reject every row again")
	}
	if n := w.count("SELECT count(*) FROM task_events WHERE task_id = ? AND event = 'task.failed'", got.ID); n != 1 {
		t.Fatalf("%d task.failed events, want 1", n)
	}
}

// One accepted row among rejected ones is a partial success, and a fully accepted file with
// blank rows in it ends with progress at the rows it read, not at its last row number.
func TestOutcomesAndOneRowTotal(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 4})
	content := append(badPhonesCSV(9), []byte("G1,good,13800000001\n")...)
	got := w.deliver(w.submit("mixed.csv", content))
	if got.Status != store.StatusPartialSuccess || got.TotalCount != 10 || got.SuccessCount != 1 || got.FailedCount != 9 {
		t.Fatalf("9 rejected and 1 accepted: %s %d/%d/%d", got.Status, got.TotalCount, got.SuccessCount, got.FailedCount)
	}
	if got.ProgressCurrent != got.TotalCount || got.ProgressTotal != got.TotalCount {
		t.Fatalf("progress %d/%d, counts total %d: one file, one total", got.ProgressCurrent, got.ProgressTotal, got.TotalCount)
	}
}

// parseResult reads the import's result off its row.
func parseResult(t *store.Task) (ResultData, bool) {
	var r ResultData
	return r, len(t.Result) > 0 && json.Unmarshal(t.Result, &r) == nil
}
