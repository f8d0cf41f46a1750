package store_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

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

	created, err := f.s.CreateMany(ctx, []store.NewTask{
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
	if _, err := f.s.CancelBy(ctx, task.TaskNo, store.Scope{Owner: "alice"}, "alice"); err != nil {
		t.Fatal(err)
	}
	var conflict *store.ConflictError
	if _, err := f.s.CancelBy(ctx, task.TaskNo, store.Scope{Owner: "alice"}, "alice"); !errors.As(err, &conflict) {
		t.Fatalf("second cancel: %v", err)
	}
	if _, err := f.s.Retry(ctx, task.TaskNo, store.Scope{Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.CancelBy(context.Background(), created[1].Task.TaskNo, store.Scope{Admin: true}, "ops"); err != nil {
		t.Fatal(err)
	}
	if a.Recorded() != 4 {
		t.Fatalf("recorded %d rows, want 4 (2 submits, a cancel, a retry)", a.Recorded())
	}
	rows, next, err := f.s.ListAudit(context.Background(), audit.Filter{})
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
	last, err := f.s.LastAudit(context.Background(), task.TaskNo, audit.ActionTaskCancel)
	if err != nil || last == nil || last.Actor != "alice" || last.Detail != "cancelled" {
		t.Fatalf("last cancel %+v %v", last, err)
	}
}

func TestAPITokensKeepOnlyAHashAndRevokeAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := &audit.Origin{Actor: "alice", Via: "session"}
	ctx := audit.NewContext(context.Background(), a)
	tok, err := f.s.CreateAPIToken(ctx, store.NewAPIToken{Hash: "ab12", Prefix: "tc_ab", Owner: "alice", Role: "user", Name: "ci",
		Scopes: []string{"tasks:read"}, CreatedBy: "alice", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.s.APITokenByHash(context.Background(), "ab12")
	if err != nil || got.TokenNo != tok.TokenNo || len(got.Scopes) != 1 || got.Scopes[0] != "tasks:read" {
		t.Fatalf("by hash: %+v %v", got, err)
	}
	if _, err := f.s.RevokeAPIToken(ctx, tok.TokenNo, store.Scope{Owner: "bob"}, "bob"); !errors.Is(err, store.ErrTokenNotFound) {
		t.Fatalf("bob revoking alice's token: %v", err)
	}
	if _, err := f.s.RevokeAPIToken(ctx, tok.TokenNo, store.Scope{Owner: "alice"}, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.APITokenByHash(context.Background(), "ab12"); !errors.Is(err, store.ErrTokenNotFound) {
		t.Fatalf("a revoked token still works: %v", err)
	}
	if a.Recorded() != 2 {
		t.Fatalf("recorded %d audit rows, want create and revoke", a.Recorded())
	}
	list, err := f.s.ListAPITokens(context.Background(), store.Scope{Owner: "alice"}, "")
	if err != nil || len(list) != 1 || list[0].RevokedAt == nil {
		t.Fatalf("list %+v %v", list, err)
	}
	if n, err := f.s.PruneAudit(context.Background(), -time.Minute, 100); err != nil || n != 2 {
		t.Fatalf("prune: %d %v", n, err)
	}
}
