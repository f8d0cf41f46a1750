package main

// Proves "a process killed between acknowledging and flushing": a worker whose work is done and whose ending waits on the completer's flush is SIGKILLed before the flush commits; the task is recovered by another worker, not lost, not run twice.

import (
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
)

// endingsMarker is a piece of the batched endings statement (store.EndAttempts, the
// completer's flush) that no other statement carries.
var endingsMarker = []byte("(v.cancel_wins AND tasks.cancel_requested) AS cancel_won")

func TestWorkerKilledWhileItsEndingWaitsForTheFlushIsRecoveredOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"export", "import"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			killWhileFlushing(t, kind)
		})
	}
}

// killWhileFlushing runs one export or import on a worker whose ending is held at the flush,
// SIGKILLs that worker, and checks how a second worker recovers the task.
func killWhileFlushing(t *testing.T, kind string) {
	const rows = 3000
	e := newEnv(t, merge(fastCleanup, map[string]string{
		"TASKCENTER_EXPORT_PAGE_SIZE":  "500",
		"TASKCENTER_IMPORT_BATCH_SIZE": "500",
		// The killed attempt's stored result is swept as soon as the task has moved on.
		"TASKCENTER_CLEANUP_TEMP_TTL": "1s",
	}))
	var imp importFile
	want, suffix, endLog := "SUCCESS", "", "exported %"
	if kind == "export" {
		e.seedCustomers(rows)
	} else {
		imp = genImport(t, "F", rows)
		want, suffix, endLog = "PARTIAL_SUCCESS", "-errors", "imported %"
	}
	// No scheduler yet: nothing may hand the task to another worker while the doomed one lives.
	api := e.start("api")
	u, err := url.Parse(e.pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The doomed worker reaches Postgres through a proxy that holds back its first endings
	// statement: it cuts exactly at the flush, whatever the machine's load.
	proxy := testenv.NewProxy(t, u.Host)
	caught := proxy.Hold(endingsMarker)
	u.Host = proxy.Addr()
	doomed := e.withVars(map[string]string{"TASKCENTER_DATABASE_URL": u.String()}).startBinary("worker")

	var sub taskJSON
	if kind == "export" {
		sub = api.submitExport(aliceToken, map[string]any{"type": "customers"})
	} else {
		sub = api.submitImport(aliceToken, imp.name, imp.content, nil)
	}
	select {
	case <-caught:
	case err := <-doomed.exit:
		doomed.exit <- err
		t.Fatalf("the worker exited before it flushed its ending: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatalf("the worker never flushed an ending; task %+v", e.mustTask(sub.ID))
	}

	// The ending is waiting on the flush: the work is done and stored, nothing is recorded,
	// and asynq has not been told the job is done.
	job0 := jobs.JobID(sub.ID, 0)
	held := e.mustTask(sub.ID)
	key1 := storage.ResultKey(sub.ID, 1, suffix, ".xlsx")
	checkHeld := func(when string) {
		t.Helper()
		tk := e.mustTask(sub.ID)
		if tk.Status != "RUNNING" || tk.Attempt != 1 || tk.FinishedAt != nil {
			t.Fatalf("%s: task is %s at attempt %d, want RUNNING at attempt 1 (nothing recorded)", when, tk.Status, tk.Attempt)
		}
		if runs := e.mustRuns(tk.ID); len(runs) != 1 || runs[0].Status != "RUNNING" || runs[0].FinishedAt != nil {
			t.Fatalf("%s: runs %s, want the one attempt still RUNNING", when, describeRuns(runs))
		}
		if n := e.count("SELECT count(*) FROM task_events WHERE task_id = ? AND status IN ('SUCCESS', 'PARTIAL_SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED')", tk.ID); n != 0 {
			t.Fatalf("%s: %d terminal events in the outbox before the ending committed", when, n)
		}
		if js := e.jobsOf(tk.Queue, sub.ID); len(js) != 1 || js[job0] != "active" {
			t.Fatalf("%s: asynq jobs of the task %v, want only %s, still active (not acknowledged)", when, js, job0)
		}
	}
	checkHeld("while the flush is held")
	if kind == "export" && (held.Current != rows || held.Total != rows) {
		t.Fatalf("the flush was caught before the work was done: progress %d/%d", held.Current, held.Total)
	}
	if kind == "import" && held.TotalCount != rows {
		t.Fatalf("the flush was caught before the work was done: %d of %d rows committed", held.TotalCount, rows)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, filepath.FromSlash(key1))); err != nil {
		t.Fatalf("the attempt's result object is not stored while its ending waits: %v", err)
	}

	doomed.signal(syscall.SIGKILL, 10*time.Second)
	proxy.Cut() // the held request dies with its connection: it never reaches Postgres
	checkHeld("after the kill")

	// A second worker, and the scheduler whose cleanup round hands the silent task over.
	e.start("worker,scheduler")
	final := api.waitStatus(aliceToken, sub.ID, 60*time.Second, "SUCCESS", "PARTIAL_SUCCESS", "FAILED", "TIMEOUT", "CANCELLED")
	if final.Status != want {
		t.Fatalf("after the takeover the task is %s, want %s: %+v", final.Status, want, final)
	}
	tk := e.mustTask(sub.ID)
	runs := e.mustRuns(tk.ID)
	if tk.Attempt != 2 || len(runs) != 2 || runs[0].Status != "SUPERSEDED" || runs[0].FinishedAt == nil ||
		runs[1].Trigger != "takeover" || runs[1].Status != want {
		t.Fatalf("attempt %d, runs %s: want the killed attempt SUPERSEDED and one takeover ending %s", tk.Attempt, describeRuns(runs), want)
	}
	var ends []struct {
		Status  string `bun:"status"`
		Attempt int    `bun:"attempt"`
	}
	if err := e.db().NewRaw("SELECT status, attempt FROM task_events WHERE task_id = ? AND status IN ('SUCCESS', 'PARTIAL_SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED')", tk.ID).
		Scan(t.Context(), &ends); err != nil {
		t.Fatal(err)
	}
	if len(ends) != 1 || ends[0].Status != want || ends[0].Attempt != 2 {
		t.Fatalf("terminal events in the outbox %+v, want one %s of attempt 2", ends, want)
	}
	if n := e.count("SELECT count(*) FROM task_logs WHERE task_id = ? AND message LIKE ?", tk.ID, endLog); n != 1 {
		t.Fatalf("%d ending lines (%q) in the task log, want 1", n, endLog)
	}

	// Exactly one result object, the recorded one; its rows each once.
	var ref struct {
		File        string `json:"file"`
		ErrorReport string `json:"error_report"`
	}
	json.Unmarshal(tk.Result, &ref) //nolint:errcheck // checked below
	key2 := storage.ResultKey(sub.ID, 2, suffix, ".xlsx")
	if got := ref.File + ref.ErrorReport; got != key2 {
		t.Fatalf("the task records result %q, want the takeover's %q", got, key2)
	}
	var o outcome
	if kind == "export" {
		o = e.checkExport(tk, rows)
	} else {
		o = e.checkImport(tk, imp)
		if n := e.count("SELECT count(*) FROM customers"); n != len(imp.valid) {
			t.Fatalf("customers = %d, want %d", n, len(imp.valid))
		}
	}
	if !o.exact {
		t.Fatalf("result not exact: %s; %d rows lost, %d duplicated", o.detail, o.lost, o.dup)
	}
	resultsDir := filepath.Join(e.dataDir, storage.Results)
	var left []string
	testenv.Eventually(t, 30*time.Second, "the killed attempt's unrecorded result to be swept", func() bool {
		left = filesUnder(t, resultsDir)
		return len(left) == 1 && left[0] == filepath.Join(e.dataDir, filepath.FromSlash(key2))
	})

	// asynq: nothing waiting for the task. The killed worker's job is still active under its
	// dead lease (asynq recovers it a minute or more later); stand in for that redelivery with
	// a copy of it, and check it runs nothing.
	if js := e.jobsOf(tk.Queue, sub.ID); len(js) != 1 || js[job0] != "active" {
		t.Fatalf("asynq jobs of the task %v, want only the dead worker's %s (active)", js, job0)
	}
	ins := e.inspector()
	defer ins.Close()
	var info *asynq.TaskInfo
	for _, lane := range jobs.Lanes(tk.Queue) {
		if in, err := ins.GetTaskInfo(lane, job0); err == nil {
			info = in
		}
	}
	if info == nil {
		t.Fatalf("job %s not found", job0)
	}
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: e.redis.Addr, DB: e.redis.DB})
	defer client.Close()
	redo := job0 + "-redelivered"
	if _, err := client.Enqueue(asynq.NewTask(info.Type, info.Payload), asynq.TaskID(redo), asynq.Queue(info.Queue)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the redelivered job to be handled", func() bool {
		in, err := ins.GetTaskInfo(info.Queue, redo)
		return errors.Is(err, asynq.ErrTaskNotFound) || err == nil && in.State == asynq.TaskStateCompleted
	})
	after := e.mustTask(sub.ID)
	if after.Status != want || after.Attempt != 2 || after.FinishedAt == nil || !after.FinishedAt.Equal(*tk.FinishedAt) {
		t.Fatalf("the redelivery changed the task: %+v, was %+v", after, tk)
	}
	if runs := e.mustRuns(tk.ID); len(runs) != 2 {
		t.Fatalf("the redelivery ran the task again: runs %s", describeRuns(runs))
	}
	if n := e.count("SELECT count(*) FROM task_events WHERE task_id = ? AND status IN ('SUCCESS', 'PARTIAL_SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED')", tk.ID); n != 1 {
		t.Fatalf("%d terminal events after the redelivery, want 1", n)
	}
	t.Logf("%s held at the flush after %d rows, killed, taken over: %s; %s", kind, rows, describeRuns(runs), o.detail)
}

// jobsOf returns the asynq jobs of a task (ids "<task_no>-…") in its queue's lanes, by state.
func (e *env) jobsOf(queue, taskNo string) map[string]string {
	e.t.Helper()
	ins := e.inspector()
	defer ins.Close()
	out := map[string]string{}
	for _, lane := range jobs.Lanes(queue) {
		for state, list := range map[string]func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
			"pending": ins.ListPendingTasks, "scheduled": ins.ListScheduledTasks, "retry": ins.ListRetryTasks,
			"active": ins.ListActiveTasks, "archived": ins.ListArchivedTasks,
		} {
			infos, err := list(lane, asynq.PageSize(1000))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				continue
			}
			if err != nil {
				e.t.Fatalf("list %s jobs of %s: %v", state, lane, err)
			}
			for _, in := range infos {
				if strings.HasPrefix(in.ID, taskNo+"-") {
					out[in.ID] = state
				}
			}
		}
	}
	return out
}
