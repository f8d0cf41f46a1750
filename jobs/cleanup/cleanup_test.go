package cleanup_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/jobs/jobstest"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// fixture is the store's test fixture (Exec, Count, Get) with a cleaner over it.
type fixture struct {
	*storetest.Fixture
	pg      *storetest.Postgres
	files   storage.Store
	root    string // the data dir
	cleaner *cleanup.Cleaner
	insp    *asynq.Inspector
	seen    *reports // every report cleaner's rounds gave its observer

	// What cleaner was built from, for building a second replica (replica).
	cfg    cleanup.Config
	enq    *jobs.Enqueuer
	logger *slog.Logger
}

// perRound runs n rounds of c and returns what count reads from each round's report.
func perRound(c *cleanup.Cleaner, n int, count func(cleanup.Report) int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = count(c.Round(context.Background()))
	}
	return out
}

func newFixture(t *testing.T, batch int) *fixture {
	t.Helper()
	return newFixtureOn(t, batch, storage.Config{}, time.Hour)
}

// newFixtureOn is newFixture on the given store, with ttl as the upload and temp TTLs.
func newFixtureOn(t *testing.T, batch int, sc storage.Config, ttl time.Duration) *fixture {
	t.Helper()
	w := jobstest.New(t, sc)
	client := asynq.NewClientFromRedisClient(w.Redis)
	insp := asynq.NewInspectorFromRedisClient(w.Redis)
	sched, _ := cleanup.ParseSpec("* * * * *")
	cfg := cleanup.Config{Schedule: sched, Location: time.UTC, OrphanGrace: time.Minute, TakeoverAfter: 30 * time.Second,
		BatchSize: batch, UploadTTL: ttl, TempTTL: ttl, Retention: 30 * 24 * time.Hour}
	logger := slog.New(slog.DiscardHandler)
	enq := jobs.NewEnqueuer(client, insp, nil)
	seen := &reports{}
	c := cleanup.New(cfg, "test", cleanup.Deps{Store: w.Store, Enqueuer: enq, Files: w.Files, Observer: seen, Logger: logger})
	return &fixture{Fixture: &storetest.Fixture{T: t, DB: w.PG.DB, S: w.Store}, pg: w.PG, files: w.Files, root: w.Root, cleaner: c, insp: insp, seen: seen, cfg: cfg, enq: enq, logger: logger}
}

func (f *fixture) task(params string) *store.Task {
	f.T.Helper()
	return f.Create(store.NewTask{Type: "export:customers", Owner: "alice", Queue: "exports", MaxRetry: 3, TimeoutSeconds: 600,
		Params: json.RawMessage(params)})
}

// file writes a file under the data dir with the given age.
func (f *fixture) file(rel string, age time.Duration) string {
	f.T.Helper()
	p := filepath.Join(f.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		f.T.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		f.T.Fatal(err)
	}
	old := time.Now().Add(-age)
	os.Chtimes(p, old, old)
	return p
}

// running makes a RUNNING task whose first attempt worker claimed, and returns the
// attempt's lease.
func (f *fixture) running(worker string) (*store.Task, store.Lease) {
	f.T.Helper()
	tk := f.task(`{}`)
	c, err := f.S.ClaimTask(context.Background(), tk.ID, worker, time.Minute)
	if err != nil {
		f.T.Fatal(err)
	}
	return tk, c.Lease
}

// succeeded makes a SUCCESS task whose result file exists and expires in expiresIn.
func (f *fixture) succeeded(expiresIn time.Duration) (*store.Task, string) {
	f.T.Helper()
	tk, lease := f.running("w")
	rel := storage.Results + "/" + tk.TaskNo + ".xlsx"
	p := f.file(rel, 0)
	exp := time.Now().Add(expiresIn)
	if _, err := f.S.EndFinished(context.Background(), lease, store.Outcome{Status: store.StatusSuccess, ResultExpiresAt: &exp,
		Result: json.RawMessage(`{"file":"` + rel + `","rows":7}`)}); err != nil {
		f.T.Fatal(err)
	}
	return tk, p
}

// cleanerWith builds a cleaner over the fixture's database, Redis and files with another
// config; d carries the collaborators a step needs (alerters), the rest is the fixture's.
func (f *fixture) cleanerWith(cfg cleanup.Config, d cleanup.Deps) *cleanup.Cleaner {
	d.Store, d.Enqueuer, d.Files, d.Logger = f.S, f.enq, f.files, f.logger
	return cleanup.New(cfg, "test", d)
}

// takenOver makes a RUNNING task whose first attempt went silent and was taken over: attempt
// 2 runs now, attempt 1 is dead.
func (f *fixture) takenOver() *store.Task {
	f.T.Helper()
	tk, _ := f.running("killed")
	f.Exec("UPDATE tasks SET heartbeat_at = now() - interval '1 hour' WHERE id = ?", tk.ID)
	if _, err := f.S.ClaimTask(context.Background(), tk.ID, "w2", time.Minute); err != nil {
		f.T.Fatal(err)
	}
	return tk
}

// scratch makes an entry in this node's scratch dir, named after prefix, with the given age;
// it returns the entry's path.
func (f *fixture) scratch(prefix string, age time.Duration) string {
	f.T.Helper()
	tmp, err := f.files.CreateTemp(prefix, ".xlsx")
	if err != nil {
		f.T.Fatal(err)
	}
	tmp.Close()
	dir := filepath.Dir(tmp.Name())
	old := time.Now().Add(-age)
	if err := os.Chtimes(dir, old, old); err != nil {
		f.T.Fatal(err)
	}
	return dir
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
