package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/live"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
)

// bulk posts a bulk action as token and returns its results, failing unless it answered 200.
func (e *apiEnv) bulk(action, token string, ids ...string) []BulkResult {
	e.t.Helper()
	rec := e.callJSON("POST", "/api/v1/tasks/"+action, token, map[string]any{"ids": ids})
	var out BulkView
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
		e.t.Fatalf("%s %v: %d %s", action, ids, rec.Code, rec.Body)
	}
	return out.Results
}

// count runs a query answering one number.
func (e *apiEnv) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pg.DB.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// outcomes reads results as "id outcome code" lines.
func outcomes(results []BulkResult) []string {
	return mapped(results, func(r BulkResult) string { return strings.TrimSpace(r.ID + " " + r.Outcome + " " + r.Code) })
}

// A bulk cancel and a bulk retry answer for each task, in the order named, by the single
// routes' rules: waiting tasks are cancelled, a running one is asked to stop, a finished one
// is not allowed, another user's and an unknown one are not found; only a failed, timed-out
// or cancelled task is retried, never an import whose every row was rejected (its reason
// said). One audit row per task, an outbox event per change, and nothing else changed.
func TestBulkCancelAndRetryAnswerEachTask(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	waiting1, waiting2 := e.imported("alice", "a.xlsx"), e.imported("alice", "b.xlsx")
	running := e.imported("alice", "c.xlsx")
	if _, err := e.st.ClaimTask(ctx, running.ID, "w1", time.Minute); err != nil {
		t.Fatal(err)
	}
	finished := e.finishedExport(nil)
	rejected := e.imported("alice", "all-bad.xlsx")
	claimed, err := e.st.ClaimTask(ctx, rejected.ID, "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.EndFailed(ctx, claimed.Lease, task.CodeAllRowsRejected, "all 3 rows were rejected"); err != nil {
		t.Fatal(err)
	}
	bobs := e.imported("bob", "a.xlsx")

	results := e.bulk("cancel", aliceToken, waiting1.TaskNo, finished.TaskNo, bobs.TaskNo, "tsk_NOSUCHTASK", waiting1.TaskNo, running.TaskNo, waiting2.TaskNo)
	want := []string{
		waiting1.TaskNo + " done", finished.TaskNo + " not_allowed status_conflict", bobs.TaskNo + " not_found task_not_found",
		"tsk_NOSUCHTASK not_found task_not_found", running.TaskNo + " done", waiting2.TaskNo + " done",
	}
	if got := outcomes(results); !slices.Equal(got, want) {
		t.Fatalf("bulk cancel:\n got %q\nwant %q", got, want)
	}
	if r := results[0]; r.Task == nil || r.Task.Status != store.StatusCancelled || r.Message != "" {
		t.Fatalf("a waiting task's result: %+v", r)
	}
	if r := results[4]; r.Task == nil || r.Task.Status != store.StatusRunning || !r.Task.CancelRequested {
		t.Fatalf("a running task's result: %+v", r)
	}
	if r := results[1]; r.Task != nil || r.Message != "cannot cancel a task that is SUCCESS" || r.Params["op"] != "cancel" || r.Params["status"] != "SUCCESS" {
		t.Fatalf("a finished task's result: %+v", r)
	}
	if got, err := e.st.Get(ctx, bobs.TaskNo, store.Scope{Admin: true}); err != nil || got.Status != store.StatusPending {
		t.Fatalf("bob's task after alice's bulk cancel: %v %v", got.Status, err)
	}
	if n := e.count(`SELECT count(*) FROM task_events WHERE task_no IN (?, ?) AND status = 'CANCELLED'`, waiting1.TaskNo, waiting2.TaskNo); n != 2 {
		t.Fatalf("%d cancelled events for the two waiting tasks, want 2 (one each)", n)
	}

	results = e.bulk("retry", aliceToken, waiting1.TaskNo, rejected.TaskNo, finished.TaskNo, waiting2.TaskNo)
	want = []string{waiting1.TaskNo + " done", rejected.TaskNo + " not_allowed status_conflict", finished.TaskNo + " not_allowed status_conflict",
		waiting2.TaskNo + " done"}
	if got := outcomes(results); !slices.Equal(got, want) {
		t.Fatalf("bulk retry:\n got %q\nwant %q", got, want)
	}
	if r := results[0]; r.Task == nil || r.Task.Status != store.StatusPending {
		t.Fatalf("a retried task's result: %+v", r)
	}
	if r := results[1]; !strings.Contains(r.Message, "every row of this import was rejected") {
		t.Fatalf("the all-rejected import's reason: %+v", r)
	}

	// The audit trail reads as if each task had been its own request.
	for _, c := range []struct {
		target string
		want   []string // oldest first: action outcome status
	}{
		{waiting1.TaskNo, []string{"task.cancel success 0", "task.retry success 0"}},
		{finished.TaskNo, []string{"task.cancel refused 409", "task.retry refused 409"}},
		{bobs.TaskNo, []string{"task.cancel refused 404"}},
		{"tsk_NOSUCHTASK", []string{"task.cancel refused 404"}},
		{running.TaskNo, []string{"task.cancel success 0"}},
		{rejected.TaskNo, []string{"task.retry refused 409"}},
	} {
		var got []string
		rows := e.auditRows("target=" + c.target + "&action=task.")
		for i := len(rows) - 1; i >= 0; i-- {
			if rows[i].Action == audit.ActionTaskSubmit {
				continue
			}
			if rows[i].Actor != "alice" {
				t.Errorf("%s: audit row by %q", c.target, rows[i].Actor)
			}
			got = append(got, fmt.Sprintf("%s %s %d", rows[i].Action, rows[i].Outcome, rows[i].Status))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("audit of %s:\n got %q\nwant %q", c.target, got, c.want)
		}
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE target = '' AND action LIKE 'task.%'`); n != 0 {
		t.Fatalf("the bulk requests left %d rows of their own", n)
	}

	// An admin acts on anyone's tasks.
	if got := outcomes(e.bulk("cancel", adminToken, bobs.TaskNo)); !slices.Equal(got, []string{bobs.TaskNo + " done"}) {
		t.Fatalf("the admin's bulk cancel: %q", got)
	}
}

// A bulk action names from 1 to 100 ids that can be task ids; otherwise nothing is done and
// the answer says which ids are wrong.
func TestBulkActionsRefuseBadIDLists(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	waiting := e.imported("alice", "a.xlsx")
	many := make([]string, maxBulk+1)
	for i := range many {
		many[i] = waiting.TaskNo
	}
	for _, c := range []struct {
		name, body string
		status     int
		code       string
		fields     []string
	}{
		{"no ids", `{"ids":[]}`, http.StatusUnprocessableEntity, "invalid_ids", []string{"ids"}},
		{"no ids field", `{}`, http.StatusUnprocessableEntity, "invalid_ids", []string{"ids"}},
		{"too many", mustJSON(map[string]any{"ids": many}), http.StatusUnprocessableEntity, "invalid_ids", []string{"ids"}},
		{"not ids", mustJSON(map[string]any{"ids": []string{waiting.TaskNo, "a\tb", "", strings.Repeat("x", 65)}}), http.StatusUnprocessableEntity, "invalid_ids",
			[]string{"ids[1]", "ids[2]", "ids[3]"}},
		{"a NUL", `{"ids":["tsk_A","a\u0000b"]}`, http.StatusBadRequest, "invalid_body", []string{"ids[1]"}},
		{"an unknown field", `{"ids":["tsk_A"],"force":true}`, http.StatusBadRequest, "invalid_body", nil},
		{"ids as a string", `{"ids":"tsk_A"}`, http.StatusBadRequest, "invalid_body", nil},
	} {
		for _, action := range []string{"cancel", "retry"} {
			rec := e.call("POST", "/api/v1/tasks/"+action, aliceToken, strings.NewReader(c.body))
			p := problemOf(t, rec)
			var fields []string
			for _, f := range p.Errors {
				fields = append(fields, f.Field)
			}
			if rec.Code != c.status || p.Code != c.code || (c.fields != nil && !slices.Equal(fields, c.fields)) {
				t.Errorf("%s %s: %d %s %v", action, c.name, rec.Code, p.Code, fields)
			}
		}
	}
	if got, err := e.st.Get(context.Background(), waiting.TaskNo, store.Scope{Admin: true}); err != nil || got.Status != store.StatusPending {
		t.Fatalf("after refused bulk actions the task is %v (%v)", got.Status, err)
	}
	// A hundred is fine, the same id counting once.
	if got := outcomes(e.bulk("cancel", aliceToken, many[:maxBulk]...)); !slices.Equal(got, []string{waiting.TaskNo + " done"}) {
		t.Fatalf("a hundred of the same id: %q", got)
	}
}

// Each task a bulk action changes is announced on the live streams at once, as the single
// routes announce theirs.
func TestBulkActionsAnnounceEachChange(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{Poll: time.Hour}) // a wake-up must come from the announcement
	one, two := s.submit(t, aliceToken), s.submit(t, aliceToken)
	all := s.open(t, "/api/v1/events", aliceToken)
	all.next(5 * time.Second) // its position
	if got := outcomes(s.bulk("cancel", aliceToken, one.TaskNo, two.TaskNo)); !slices.Equal(got, []string{one.TaskNo + " done", two.TaskNo + " done"}) {
		t.Fatalf("bulk cancel: %q", got)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		_, v := all.expect("status", store.StatusCancelled)
		if v.Event.Name != store.EventCancelled || v.Event.Actor != "alice" {
			t.Fatalf("cancel event %+v", v.Event)
		}
		seen[v.ID] = true
	}
	if !seen[one.TaskNo] || !seen[two.TaskNo] {
		t.Fatalf("announced %v", seen)
	}
	if got := outcomes(s.bulk("retry", aliceToken, one.TaskNo)); !slices.Equal(got, []string{one.TaskNo + " done"}) {
		t.Fatalf("bulk retry: %q", got)
	}
	if _, v := all.expect("status", store.StatusPending); v.Event.Name != store.EventRetried || v.ID != one.TaskNo {
		t.Fatalf("retry event %+v", v)
	}
}
