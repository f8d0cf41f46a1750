package store_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"

	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
)

// A transition made with an audit in its context records its audit row in the same statement;
// one that is refused records nothing; one made without an audit (a worker's) records nothing.
func TestTransitionsRecordTheirAuditRowWithTheChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := &audit.Origin{Actor: "alice", Via: "token", ClientAddr: "203.0.113.9", RequestID: "req_1"}
	ctx := audit.NewContext(context.Background(), a)

	created, err := f.S.CreateMany(ctx, []store.NewTask{
		{TaskNo: "tsk_" + rand.Text(), Type: "export:customers", Owner: "alice", Queue: "exports", MaxRetry: 3, TimeoutSeconds: 60, Params: json.RawMessage(`{}`)},
		{TaskNo: "tsk_" + rand.Text(), Type: "export:customers", Owner: "alice", Queue: "exports", MaxRetry: 3, TimeoutSeconds: 60, Params: json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Recorded() != 2 {
		t.Fatalf("two submits recorded %d rows", a.Recorded())
	}
	task := created[0].Task
	if _, err := f.S.CancelBy(ctx, task.TaskNo, store.Scope{Owner: "alice"}, "alice"); err != nil {
		t.Fatal(err)
	}
	var conflict *store.ConflictError
	if _, err := f.S.CancelBy(ctx, task.TaskNo, store.Scope{Owner: "alice"}, "alice"); !errors.As(err, &conflict) {
		t.Fatalf("second cancel: %v", err)
	}
	if _, err := f.S.Retry(ctx, task.TaskNo, store.Scope{Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.S.CancelBy(context.Background(), created[1].Task.TaskNo, store.Scope{Admin: true}, "ops"); err != nil {
		t.Fatal(err)
	}
	if a.Recorded() != 4 {
		t.Fatalf("recorded %d rows, want 4 (2 submits, a cancel, a retry)", a.Recorded())
	}
	rows, next, err := f.S.ListAudit(context.Background(), audit.Filter{})
	if err != nil || next != 0 {
		t.Fatal(err, next)
	}
	var got []string
	for _, r := range rows {
		if r.Actor != "alice" || r.ClientAddr != "203.0.113.9" || r.RequestID != "req_1" || r.Outcome != audit.Success || r.Via != "token" {
			t.Fatalf("row %+v", r)
		}
		got = append(got, r.Action+" "+r.Target)
	}
	want := []string{"task.retry " + task.TaskNo, "task.cancel " + task.TaskNo, "task.submit " + created[1].Task.TaskNo, "task.submit " + task.TaskNo}
	if len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[3] != want[3] {
		t.Fatalf("audit rows %v, want %v", got, want)
	}
	last, err := f.S.LastAudit(context.Background(), task.TaskNo, audit.ActionTaskCancel)
	if err != nil || last == nil || last.Actor != "alice" || last.Detail != "cancelled" {
		t.Fatalf("last cancel %+v %v", last, err)
	}
}
