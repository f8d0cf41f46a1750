// Package storetest is test support for code over the store: each test's own Postgres
// database with every migration applied (NewPostgres); the fixture shared by the tests of
// package store, of its subpackages tested through the whole store (store/webhooks) and of the
// cleanup: a fresh database, the store over it, and the few steps those tests take on it; and
// the same steps (Get, Exec, Count) for tests that keep their own world over the database.
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
	return f.Create(store.NewTask{Type: "export:customers", Owner: "alice", Queue: "exports",
		MaxRetry: 3, TimeoutSeconds: 1800, Params: json.RawMessage(`{"a":1}`)})
}

// Create creates nt as a new PENDING task, under a fresh task number when it names none, and
// fails the test unless it was created.
func (f *Fixture) Create(nt store.NewTask) *store.Task {
	f.T.Helper()
	if nt.TaskNo == "" {
		nt.TaskNo = "tsk_" + rand.Text()
	}
	task, created, err := f.S.Create(context.Background(), nt)
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

// Get reads a task by id and fails the test if it could not.
func (f *Fixture) Get(id int64) *store.Task {
	f.T.Helper()
	return Get(f.T, f.S, id)
}

// Exec runs a statement and fails the test if it could not.
func (f *Fixture) Exec(query string, args ...any) {
	f.T.Helper()
	Exec(f.T, f.DB, query, args...)
}

// Count runs a query answering one number.
func (f *Fixture) Count(query string, args ...any) int {
	f.T.Helper()
	return Count(f.T, f.DB, query, args...)
}

// The steps below are the fixture's for tests that keep their own world over the database (a
// runtime, jobstest's World, the binary).

// Get reads a task by id from st and fails t if it could not.
func Get(t testing.TB, st *store.Store, id int64) *store.Task {
	t.Helper()
	task, err := st.GetByID(context.Background(), id)
	if err != nil {
		t.Fatalf("get task %d: %v", id, err)
	}
	return task
}

// Exec runs a statement on db and fails t if it could not.
func Exec(t testing.TB, db *bun.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Count runs a query on db answering one number, and fails t if it could not.
func Count(t testing.TB, db *bun.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.NewRaw(query, args...).Scan(context.Background(), &n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
