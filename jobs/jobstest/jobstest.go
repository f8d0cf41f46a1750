// Package jobstest runs task handlers under the real jobs.Runtime in tests, one delivery at
// a time and without an asynq server: the test hands each attempt over as asynq would and
// reads the task's row after it.
package jobstest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// World is what a handler runs against: a Postgres schema, a Redis database and a data
// directory of the test's own.
type World struct {
	t     testing.TB
	PG    *storetest.Postgres
	Redis *redis.Client
	Store *store.Store
	Files storage.Store
	Root  string // the data dir: the local backend's objects, and scratch on both backends
}

// New is a World whose files are kept as sc says (the zero Config: on disk under Root).
func New(t testing.TB, sc storage.Config) *World {
	t.Helper()
	pg := storetest.NewPostgres(t)
	rd := testenv.NewRedis(t)
	fs, root := testenv.NewFiles(t, sc)
	return &World{t: t, PG: pg, Redis: rd.Client, Store: store.New(pg.DB), Files: fs, Root: root}
}

// Path is where the local backend keeps the object key (a task's result file, an upload).
func (w *World) Path(key string) string { return filepath.Join(w.Root, filepath.FromSlash(key)) }

// Runtime is a runtime of worker "test" running h, whose tasks follow policy. Heartbeats and
// takeovers are too slow to happen during a test; progress is written at once. It is closed
// when the test ends.
func (w *World) Runtime(h jobs.Handler, policy jobs.TypePolicy) *jobs.Runtime {
	client := asynq.NewClientFromRedisClient(w.Redis)
	rt := jobs.NewRuntime(jobs.RuntimeConfig{WorkerID: "test", HeartbeatInterval: time.Hour, TakeoverAfter: time.Hour,
		ProgressInterval: time.Millisecond, Types: map[string]jobs.TypePolicy{h.Type(): policy}},
		jobs.RuntimeDeps{Store: w.Store, Enqueuer: jobs.NewEnqueuer(client, asynq.NewInspectorFromRedisClient(w.Redis), nil),
			Board: jobs.NewProgressBoard(w.Redis), Files: w.Files, Logger: slog.New(slog.DiscardHandler)})
	rt.Register(h)
	w.t.Cleanup(rt.Close)
	return rt
}

// Deliver runs one attempt of task on rt, as an asynq delivery would, and returns the row
// after it.
func (w *World) Deliver(rt *jobs.Runtime, task *store.Task) *store.Task {
	w.t.Helper()
	payload, _ := json.Marshal(map[string]any{"task_id": task.ID, "task_no": task.TaskNo, "attempt": task.Attempt})
	rt.ProcessTask(context.Background(), asynq.NewTask(task.Type, payload)) //nolint:errcheck // the row says how it ended
	return storetest.Get(w.t, w.Store, task.ID)
}

// Create stores nt as a new PENDING task, under a fresh task number when it names none, and
// fails t if it could not.
func (w *World) Create(t testing.TB, nt store.NewTask) *store.Task {
	t.Helper()
	if nt.TaskNo == "" {
		nt.TaskNo = "tsk_" + rand.Text()
	}
	task, _, err := w.Store.Create(context.Background(), nt)
	if err != nil {
		t.Fatalf("create a %s task: %v", nt.Type, err)
	}
	return task
}

// RunExport runs one task of h's type on the exports queue, owned by owner and given params,
// on a runtime of its own (one retry, a minute per attempt), as Succeed does: the result is
// decoded into result, and t fails unless the task ended SUCCESS.
func (w *World) RunExport(t testing.TB, h jobs.Handler, owner string, params, result any) *store.Task {
	t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	task := w.Create(t, store.NewTask{Type: h.Type(), Owner: owner, Queue: "exports", MaxRetry: 1, TimeoutSeconds: 600, Params: raw})
	return w.Succeed(t, w.Runtime(h, jobs.TypePolicy{MaxRetry: 1, RetryBase: time.Second, MaxRuntime: time.Minute}), task, result)
}

// Succeed runs one attempt of task on rt, as Deliver does, and decodes the result it stored
// into result; t fails unless the attempt ended the task SUCCESS.
func (w *World) Succeed(t testing.TB, rt *jobs.Runtime, task *store.Task, result any) *store.Task {
	t.Helper()
	done := w.Deliver(rt, task)
	if err := json.Unmarshal(done.Result, result); err != nil || done.Status != store.StatusSuccess {
		t.Fatalf("%s %s: %s (%v)", task.Type, done.Status, done.Result, err)
	}
	return done
}
