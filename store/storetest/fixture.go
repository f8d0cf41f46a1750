// Package storetest is test support for code over the store: each test's own Postgres schema
// with every migration applied (NewPostgres), and the fixture shared by the tests of package
// store and of its subpackages that are tested through the whole store (store/webhooks): a
// fresh database, the store over it, and the few steps those tests take on it.
//
// It sits beside store rather than in internal/testenv because opening and migrating a
// database needs store: internal/testenv stays below every package whose tests it serves.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store"
)

// Takeover is the takeover window the fixture's claims give.
const Takeover = 30 * time.Second

// Fixture is one test's database and the store over it.
type Fixture struct {
	T  *testing.T
	DB *bun.DB
	S  *store.Store
}

// New returns a fixture over a fresh database.
func New(t *testing.T) *Fixture {
	t.Helper()
	pg := NewPostgres(t)
	return &Fixture{T: t, DB: pg.DB, S: store.New(pg.DB)}
}

// Task creates a PENDING task owned by alice.
func (f *Fixture) Task() *store.Task {
	f.T.Helper()
	task, created, err := f.S.Create(context.Background(), store.NewTask{
		TaskNo: "tsk_" + rand.Text(), Type: "export:customers", Owner: "alice", Queue: "exports",
		MaxRetry: 3, TimeoutSeconds: 1800, Params: json.RawMessage(`{"a":1}`),
	})
	if err != nil || !created {
		f.T.Fatalf("create: created=%v err=%v", created, err)
	}
	return task
}

// Claim claims a task and fails the test if it could not.
func (f *Fixture) Claim(task *store.Task, worker string) store.Lease {
	f.T.Helper()
	c, err := f.S.ClaimTask(context.Background(), task.ID, worker, Takeover)
	if err != nil {
		f.T.Fatalf("claim by %s: %v", worker, err)
	}
	return c.Lease
}

// Exec runs a statement and fails the test if it could not.
func (f *Fixture) Exec(query string, args ...any) {
	f.T.Helper()
	if _, err := f.DB.ExecContext(context.Background(), query, args...); err != nil {
		f.T.Fatalf("exec %q: %v", query, err)
	}
}

// Count runs a query answering one number.
func (f *Fixture) Count(query string, args ...any) int {
	f.T.Helper()
	var n int
	if err := f.DB.NewRaw(query, args...).Scan(context.Background(), &n); err != nil {
		f.T.Fatal(err)
	}
	return n
}
