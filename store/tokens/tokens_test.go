package tokens_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store/audit"
	"github.com/taskcenter/taskcenter/store/internal/columntest"
	"github.com/taskcenter/taskcenter/store/pg"
	"github.com/taskcenter/taskcenter/store/storetest"
	"github.com/taskcenter/taskcenter/store/tokens"
)

// The column list the statements name is exactly the model's columns, in model order.
func TestColumnListsMatchModels(t *testing.T) {
	t.Parallel()
	columntest.Check(t, tokens.ColumnLists())
}

func TestAPITokensKeepOnlyAHashAndRevokeAtOnce(t *testing.T) {
	t.Parallel()
	db := storetest.NewPostgres(t).DB
	toks, trail := tokens.New(db), audit.New(db)
	a := &audit.Origin{Actor: "alice", Via: "session"}
	ctx := audit.NewContext(context.Background(), a)
	tok, err := toks.CreateAPIToken(ctx, tokens.NewAPIToken{Hash: "ab12", Prefix: "tc_ab", Owner: "alice", Role: "user", Name: "ci",
		Scopes: []string{"tasks:read"}, CreatedBy: "alice", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := toks.APITokenByHash(context.Background(), "ab12")
	if err != nil || got.TokenNo != tok.TokenNo || len(got.Scopes) != 1 || got.Scopes[0] != "tasks:read" {
		t.Fatalf("by hash: %+v %v", got, err)
	}
	if _, err := toks.RevokeAPIToken(ctx, tok.TokenNo, pg.Scope{Owner: "bob"}, "bob"); !errors.Is(err, tokens.ErrNotFound) {
		t.Fatalf("bob revoking alice's token: %v", err)
	}
	if _, err := toks.RevokeAPIToken(ctx, tok.TokenNo, pg.Scope{Owner: "alice"}, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := toks.APITokenByHash(context.Background(), "ab12"); !errors.Is(err, tokens.ErrNotFound) {
		t.Fatalf("a revoked token still works: %v", err)
	}
	if a.Recorded() != 2 {
		t.Fatalf("recorded %d audit rows, want create and revoke", a.Recorded())
	}
	list, err := toks.ListAPITokens(context.Background(), pg.Scope{Owner: "alice"}, "")
	if err != nil || len(list) != 1 || list[0].RevokedAt == nil {
		t.Fatalf("list %+v %v", list, err)
	}
	if n, err := trail.PruneAudit(context.Background(), -time.Minute, 100); err != nil || n != 2 {
		t.Fatalf("prune: %d %v", n, err)
	}
}
