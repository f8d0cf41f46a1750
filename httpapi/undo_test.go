package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/taskcenter/taskcenter/jobs/importer"
)

// POST /api/v1/tasks/{id}/undo creates the undo of a finished import once (asked again, the
// same task comes back), answers 404 to a user who cannot see the import like every task
// route, refuses to undo an undo with a message saying what to do, and leaves one task.undo
// audit row on the import per request.
func TestUndoEndpoint(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	imp := e.finishedImport(nil)
	path := "/api/v1/tasks/" + imp.TaskNo + "/undo"

	var v TaskView
	rec := e.call("GET", "/api/v1/tasks/"+imp.TaskNo, aliceToken, nil)
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || v.Links.Undo != path {
		t.Fatalf("the import's links %+v, want undo %s", v.Links, path)
	}

	rec = e.call("POST", path, aliceToken, nil)
	var first SubmitView
	if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &first) != nil || first.Task.Type != importer.UndoType ||
		first.Task.Owner != "alice" || rec.Header().Get("Location") != "/api/v1/tasks/"+first.Task.ID {
		t.Fatalf("undo: %d %s", rec.Code, rec.Body)
	}
	rec = e.call("POST", path, aliceToken, nil)
	var again SubmitView
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &again) != nil || !again.Duplicate || again.Task.ID != first.Task.ID {
		t.Fatalf("undo asked again: %d %s, want 200 with %s", rec.Code, rec.Body, first.Task.ID)
	}

	if rec := e.call("POST", path, bobToken, nil); rec.Code != http.StatusNotFound || problemOf(t, rec).Code != "task_not_found" {
		t.Fatalf("bob's undo of alice's import: %d %s, want 404", rec.Code, rec.Body)
	}
	rec = e.call("POST", "/api/v1/tasks/"+first.Task.ID+"/undo", aliceToken, nil)
	if p := problemOf(t, rec); rec.Code != http.StatusConflict || p.Code != "undo_of_undo" || p.Detail != "an undo cannot be undone; import the file again" {
		t.Fatalf("undo of the undo: %d %s", rec.Code, rec.Body)
	}
	if n := e.count(`SELECT count(*) FROM tasks WHERE type = ?`, importer.UndoType); n != 1 {
		t.Fatalf("%d undo tasks, want 1", n)
	}

	rows := e.auditRows("action=task.undo")
	got := map[string]int{}
	for _, r := range rows {
		got[r.Actor+" "+r.Target+" "+r.Outcome+" "+http.StatusText(r.Status)]++
	}
	want := map[string]int{
		"alice " + imp.TaskNo + " success Accepted":    1,
		"alice " + imp.TaskNo + " success OK":          1,
		"bob " + imp.TaskNo + " refused Not Found":     1,
		"alice " + first.Task.ID + " refused Conflict": 1,
	}
	if len(got) != len(want) {
		t.Fatalf("task.undo audit rows %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("task.undo audit rows %v, want %v", got, want)
		}
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'task.submit'`); n != 0 {
		t.Fatalf("%d task.submit audit rows: the undo's request has its own row only", n)
	}
}
