package webhooks_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// The webhooks are tested through the whole store, as the dispatcher and the API use them:
// tasks move, their events reach the outbox, the fan-out turns them into deliveries. This is
// the part of store's test fixture those tests need.

const takeover = 30 * time.Second

type fixture struct {
	t  *testing.T
	db *bun.DB
	s  *store.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pg := testenv.NewPostgres(t)
	return &fixture{t: t, db: pg.DB, s: store.New(pg.DB)}
}

// task creates a PENDING task owned by alice.
func (f *fixture) task() *store.Task {
	f.t.Helper()
	task, created, err := f.s.Create(context.Background(), store.NewTask{
		TaskNo: "tsk_" + rand.Text(), Type: "export:customers", Owner: "alice", Queue: "exports",
		MaxRetry: 3, TimeoutSeconds: 1800, Params: json.RawMessage(`{"a":1}`),
	})
	if err != nil || !created {
		f.t.Fatalf("create: created=%v err=%v", created, err)
	}
	return task
}

// claim claims a task and fails the test if it could not.
func (f *fixture) claim(task *store.Task, worker string) store.Lease {
	f.t.Helper()
	c, err := f.s.ClaimTask(context.Background(), task.ID, worker, takeover)
	if err != nil {
		f.t.Fatalf("claim by %s: %v", worker, err)
	}
	return c.Lease
}

func (f *fixture) exec(query string, args ...any) {
	f.t.Helper()
	if _, err := f.db.ExecContext(context.Background(), query, args...); err != nil {
		f.t.Fatalf("exec %q: %v", query, err)
	}
}

func (f *fixture) count(query string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.db.NewRaw(query, args...).Scan(context.Background(), &n); err != nil {
		f.t.Fatal(err)
	}
	return n
}
