package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/internal/columntest"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// A cancel acknowledged while a task runs wins over every way the attempt can end except
// success: the task ends CANCELLED and is never retried, whatever error follows.
func TestRequestedCancelWinsOverEveryEndingButSuccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	endings := map[string]func(f *fixture, l store.Lease) (*store.Task, error){
		"transient error": func(f *fixture, l store.Lease) (*store.Task, error) {
			return f.S.EndRetryWait(ctx, l, "transient", "db blip", time.Second)
		},
		"hand back": func(f *fixture, l store.Lease) (*store.Task, error) { return f.S.EndInterrupted(ctx, l, "shutdown") },
		"bad input": func(f *fixture, l store.Lease) (*store.Task, error) { return f.S.EndFailed(ctx, l, "bad", "broken") },
		"retries exhausted": func(f *fixture, l store.Lease) (*store.Task, error) {
			return f.S.EndGaveUp(ctx, l, "retries_exhausted", "gave up")
		},
		"timeout": func(f *fixture, l store.Lease) (*store.Task, error) { return f.S.EndTimedOut(ctx, l, "stalled") },
	}
	for name, end := range endings {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			task, l := f.inStatus(store.StatusRunning)
			f.cancel(task)
			got, err := end(f, l)
			if err != nil {
				t.Fatal(err)
			}
			row := f.Get(task.ID)
			if got.Status != store.StatusCancelled || row.Status != store.StatusCancelled {
				t.Fatalf("returned %s, row %s; want CANCELLED", got.Status, row.Status)
			}
			if row.NextRetryAt != nil || row.FinishedAt == nil || row.AlertDueAt != nil || row.RetryCount != 0 {
				t.Fatalf("a cancelled task must not be scheduled, alerted or charged a retry: %+v", row)
			}
			if _, err := f.S.ClaimTask(ctx, task.ID, "w2", takeover); err == nil {
				t.Fatal("a cancelled task was claimed again")
			}
			runs, _ := f.S.Runs(ctx, task.ID)
			if runs[len(runs)-1].Status != "CANCELLED" {
				t.Fatalf("run = %+v", runs[len(runs)-1])
			}
		})
	}
	t.Run("success after the last batch stays a success", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		task, l := f.inStatus(store.StatusRunning)
		f.cancel(task)
		got, err := f.S.EndFinished(ctx, l, store.Outcome{Status: store.StatusSuccess})
		if err != nil || got.Status != store.StatusSuccess {
			t.Fatalf("succeed: %v %v", got, err)
		}
	})
	t.Run("cleanup timing out a silent cancelled task cancels it", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		task, _ := f.inStatus(store.StatusRunning)
		f.cancel(task)
		f.Exec("UPDATE tasks SET heartbeat_at = now() - interval '2 hours' WHERE id = ?", task.ID)
		out, err := f.S.TimeoutStale(ctx, 10)
		if err != nil || len(out) != 1 || out[0].Status != store.StatusCancelled {
			t.Fatalf("timeout stale: %+v %v", out, err)
		}
	})
}

// Racing a cancel against every ending, many times: whatever order Postgres serialises them
// in, a task whose cancel was acknowledged (Cancel returned) before the ending committed is
// never left to run again.
func TestCancelRacingAnEndingNeverLeavesARunnableTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := range 40 {
		task, l := f.inStatus(store.StatusRunning)
		var wg sync.WaitGroup
		var ended *store.Task
		var endErr, cancelErr error
		wg.Go(func() {
			if i%2 == 0 {
				ended, endErr = f.S.EndRetryWait(ctx, l, "transient", "blip", time.Millisecond)
			} else {
				ended, endErr = f.S.EndInterrupted(ctx, l, "shutdown")
			}
		})
		wg.Go(func() { _, cancelErr = f.S.Cancel(ctx, task.TaskNo, store.Scope{Owner: "alice"}) })
		wg.Wait()
		if endErr != nil {
			t.Fatalf("ending: %v", endErr)
		}
		row := f.Get(task.ID)
		switch {
		case cancelErr == nil && ended.Status == store.StatusCancelled:
			// cancel first, ending second: the ending turned into CANCELLED
		case cancelErr == nil && ended.Status == store.StatusRetryWait:
			// ending first, then the cancel cancelled the waiting task at once
			if row.Status != store.StatusCancelled {
				t.Fatalf("round %d: cancel acknowledged after the ending, row is %s", i, row.Status)
			}
		default:
			t.Fatalf("round %d: ending %s, cancel err %v", i, ended.Status, cancelErr)
		}
		if _, err := f.S.ClaimTask(ctx, task.ID, "w2", takeover); err == nil {
			t.Fatalf("round %d: a cancelled task was claimed", i)
		}
	}
}

// An attempt that lost its lease writes no log line either.
func TestAppendLogIsFenced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task, old, live := f.takenOver()
	if err := f.S.AppendLog(ctx, old, "info", msg.Plain("zombie was here")); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("zombie log: %v", err)
	}
	if err := f.S.AppendLog(ctx, live, "info", msg.Plain("live attempt")); err != nil {
		t.Fatal(err)
	}
	logs, _ := f.S.RecentLogs(ctx, task.ID, 50)
	for _, l := range logs {
		if strings.Contains(l.Message, "zombie") {
			t.Fatalf("the superseded attempt's line was written: %+v", logs)
		}
	}
}

// The failure alert is recorded on the row: of any number of claimers exactly one sends it,
// and a manual retry re-arms it for the next exhaustion.
func TestFailureAlertIsClaimedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task, l := f.inStatus(store.StatusRunning)
	failed, err := f.S.EndGaveUp(ctx, l, "retries_exhausted", "gave up")
	if err != nil || failed.AlertDueAt == nil {
		t.Fatalf("give up: %+v %v", failed, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	claims := 0
	for range 8 {
		wg.Go(func() {
			got, err := f.S.ClaimAlert(ctx, task.ID)
			if err != nil {
				t.Error(err)
			}
			if got != nil {
				mu.Lock()
				claims++
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		due, err := f.S.ClaimDueAlerts(ctx, 0, 10)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		claims += len(due)
		mu.Unlock()
	})
	wg.Wait()
	if claims != 1 {
		t.Fatalf("alert claimed %d times, want once", claims)
	}
	if _, err := f.S.Retry(ctx, task.TaskNo, store.Scope{Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if row := f.Get(task.ID); row.AlertDueAt != nil || row.AlertedAt != nil {
		t.Fatalf("a retried task keeps its old alert state: %+v", row)
	}
	// Bad input fails without an alert.
	task2, l2 := f.inStatus(store.StatusRunning)
	if _, err := f.S.EndFailed(ctx, l2, "bad", "broken"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.S.ClaimAlert(ctx, task2.ID); got != nil {
		t.Fatal("bad input raised an alert")
	}
}

// hostileStrings are values that break a query built by formatting values into SQL.
var hostileStrings = []string{"\x00", "a\x00b", "'", "''; DROP TABLE tasks; --", "?", "?0", "$1", "::", "::text", `\`, `\'`,
	"%", "_", "a?b$2::c", "\u202e", strings.Repeat("x", 10000)}

// Every value reaches Postgres as a bound parameter: a hostile string is data (a lookup that
// finds nothing, or a stored value read back unchanged), never a change to the query's text.
// A NUL byte cannot be stored in Postgres text at all; it is refused as a data exception
// (SQLSTATE 22021), never a syntax error.
func TestValuesNeverChangeTheQueryText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	scope := store.Scope{Owner: "alice"}
	for _, v := range hostileStrings {
		hasNUL := strings.ContainsRune(v, 0)
		check := func(what string, err error) {
			t.Helper()
			if err == nil || errors.Is(err, store.ErrNotFound) {
				return
			}
			if hasNUL && strings.Contains(err.Error(), "22021") {
				return
			}
			t.Fatalf("%s with %q: %v", what, v, err)
		}
		_, err := f.S.Get(ctx, v, scope)
		check("get", err)
		_, err = f.S.Get(ctx, "tsk_x", store.Scope{Owner: v})
		check("get as owner", err)
		_, _, err = f.S.List(ctx, store.ListFilter{Types: []string{v}, Owner: v, Statuses: []store.Status{store.Status(v)}}, store.Scope{Admin: true})
		check("list", err)
		_, _, err = f.S.List(ctx, store.ListFilter{Search: v, Sort: store.SortLongest}, scope)
		check("search", err)
		_, err = f.S.StatusCounts(ctx, store.ListFilter{Search: v}, scope)
		check("count", err)
		_, err = f.S.Cancel(ctx, v, scope)
		check("cancel", err)
		_, err = f.S.Retry(ctx, v, scope)
		check("retry", err)
		_, err = f.S.FindByKey(ctx, v, v, v)
		check("find by key", err)
		task, _, err := f.S.Create(ctx, store.NewTask{TaskNo: "tsk_" + strings.ToUpper(strings.Repeat("a", 4)) + randomSuffix(),
			Type: "export:customers", Owner: "alice", Queue: "exports", BizKey: v, MaxRetry: 3, TimeoutSeconds: 60})
		check("create", err)
		if err == nil && (task.BizKey == nil || *task.BizKey != v) {
			t.Fatalf("biz key %q stored as %v", v, task.BizKey)
		}
	}
	if n := f.Count("SELECT count(*) FROM tasks"); n == 0 {
		t.Fatal("no task was created: the test did not exercise writes")
	}
}

// A rolling deploy: the new binary's migration adds columns, the old binary keeps working.
// Every statement names its columns, so replicas still running the previous code claim,
// heartbeat, commit and finish tasks on the wider tables.
func TestOldCodeWorksAfterAMigrationAddsColumns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, table := range []string{"tasks", "task_runs", "task_logs", "task_items", "customers", "cleanup_rounds"} {
		f.Exec("ALTER TABLE " + table + " ADD COLUMN added_by_a_later_release text NOT NULL DEFAULT 'new'")
	}
	task := f.Task()
	l := f.Claim(task, "old-binary")
	if _, err := f.S.Heartbeat(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := f.S.Progress(ctx, l, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := f.S.AppendLog(ctx, l, "info", msg.Plain("still here")); err != nil {
		t.Fatal(err)
	}
	done, err := f.S.EndFinished(ctx, l, store.Outcome{Status: store.StatusSuccess, Result: []byte(`{"rows":2}`)})
	if err != nil || done.Status != store.StatusSuccess {
		t.Fatalf("succeed: %v", err)
	}
	if _, _, err := f.S.List(ctx, store.ListFilter{}, store.Scope{Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.S.Runs(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.S.RecentLogs(ctx, task.ID, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := f.S.TakeSilent(ctx, time.Minute, time.Minute, 10); err != nil {
		t.Fatal(err)
	}
}

// The column lists the statements name are exactly the models' columns, in model order: a
// field added to a model without its column (or the reverse) fails here, not in production.
func TestColumnListsMatchModels(t *testing.T) {
	t.Parallel()
	columntest.Check(t, store.ColumnLists())
}

func randomSuffix() string { return strings.ToUpper(time.Now().Format("150405.000000000")) }

// A takeover never exceeds the retry budget and never runs a cancelled task: the claim that
// finds such a task's worker gone ends the task instead.
func TestTakeoverEndsTasksThatAreOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task := f.Task() // max_retry 3
	for i := range 3 {
		f.Claim(task, "dies")
		f.staleHeartbeat(task.ID)
		if row := f.Get(task.ID); row.RetryCount != i {
			t.Fatalf("before takeover %d: retry_count %d", i+1, row.RetryCount)
		}
	}
	f.Claim(task, "dies") // the third takeover: retry_count 3 = max_retry
	f.staleHeartbeat(task.ID)
	_, err := f.S.ClaimTask(ctx, task.ID, "w", takeover)
	var ended *store.ClaimEndedError
	if !errors.As(err, &ended) || ended.Task.Status != store.StatusFailed || ended.Task.AlertDueAt == nil {
		t.Fatalf("claim over a worn-out task = %v", err)
	}
	row := f.Get(task.ID)
	if row.RetryCount != row.MaxRetry || row.ErrorCode != "retries_exhausted" || !strings.Contains(row.ErrorMessage, "stopped responding 4 times") {
		t.Fatalf("row = %+v", row)
	}
	runs, _ := f.S.Runs(ctx, task.ID)
	for _, r := range runs {
		if r.FinishedAt == nil {
			t.Fatalf("an attempt is still open: %+v", runs)
		}
	}

	cancelled := f.Task()
	f.Claim(cancelled, "dies")
	f.cancel(cancelled)
	f.staleHeartbeat(cancelled.ID)
	_, err = f.S.ClaimTask(ctx, cancelled.ID, "w", takeover)
	if !errors.As(err, &ended) || ended.Task.Status != store.StatusCancelled || ended.Task.AlertDueAt != nil {
		t.Fatalf("claim over a cancelled dead task = %v", err)
	}
}

// Fair share: however many workers race to claim one owner's waiting tasks, no more than the
// cap run at once; the others wait (no retry spent) and another owner's task is claimable.
func TestClaimTaskCappedNeverOvershootsTheOwnersCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var tasks []*store.Task
	for range 10 {
		tasks = append(tasks, f.Task())
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	claimed, atCap := 0, 0
	for i := range 16 {
		wg.Go(func() {
			_, err := f.S.ClaimTaskCapped(ctx, tasks[i%len(tasks)].ID, fmt.Sprintf("w%d", i), takeover, 2)
			var nc *store.NotClaimableError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				claimed++
			case errors.As(err, &nc) && nc.OwnerAtCap:
				atCap++
			case errors.As(err, &nc):
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if claimed != 2 || atCap == 0 {
		t.Fatalf("claimed %d (cap 2), refused at cap %d", claimed, atCap)
	}
	if n := f.Count("SELECT count(*) FROM tasks WHERE status = 'RUNNING'"); n != 2 {
		t.Fatalf("%d running", n)
	}
	if n := f.Count("SELECT count(*) FROM tasks WHERE retry_count > 0"); n != 0 {
		t.Fatalf("waiting at the cap spent retries on %d tasks", n)
	}
	bob, _, err := f.S.Create(ctx, store.NewTask{TaskNo: "tsk_bob" + randomSuffix(), Type: "export:customers", Owner: "bob",
		Queue: "exports", MaxRetry: 3, TimeoutSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.S.ClaimTaskCapped(ctx, bob.ID, "w", takeover, 2); err != nil {
		t.Fatalf("another owner's task at alice's cap: %v", err)
	}
	top, err := f.S.TopWaitingOwners(ctx, 10)
	if err != nil || len(top) != 1 || top[0].Owner != "alice" || top[0].Waiting != 8 {
		t.Fatalf("waiting per owner = %+v %v", top, err)
	}
}

// Heart-beats and progress are HOT updates: no index holds their columns, so Postgres
// rewrites the row in place without touching any index (n_tup_hot_upd).
func TestHeartbeatsAreHOTUpdates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, l := f.inStatus(store.StatusRunning)
	f.Exec("SELECT pg_stat_force_next_flush()")
	before := f.hotUpdates()
	for i := range 50 {
		if _, err := f.S.Heartbeat(ctx, l); err != nil {
			t.Fatal(err)
		}
		if _, err := f.S.Progress(ctx, l, int64(i), 50); err != nil {
			t.Fatal(err)
		}
	}
	f.Exec("SELECT pg_stat_force_next_flush()")
	after := f.hotUpdates()
	if d, h := after.upd-before.upd, after.hot-before.hot; d < 100 || float64(h) < 0.9*float64(d) {
		t.Fatalf("%d of %d heartbeat/progress updates were HOT", h, d)
	}
}

type updCounts struct{ upd, hot int64 }

func (f *fixture) hotUpdates() updCounts {
	f.T.Helper()
	var c updCounts
	err := f.DB.QueryRowContext(context.Background(),
		`SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'tasks'::regclass`).Scan(&c.upd, &c.hot)
	if err != nil {
		f.T.Fatal(err)
	}
	return c
}

// A failed enqueue flags the task for the cleanup round's orphan step; a later enqueue that
// did succeed clears the flag, so the round leaves the task alone — but only for the task as
// it was: another attempt, or a task no longer waiting, is not touched.
func TestAnEnqueueMadeAfterAFailureTakesTheTaskOffTheOrphanList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := storetest.New(t)
	waiting, otherAttempt, cancelled := f.Task(), f.Task(), f.Task()
	for _, task := range []*store.Task{waiting, otherAttempt, cancelled} {
		if err := f.S.MarkEnqueueFailed(ctx, task.ID, task.Attempt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.S.Cancel(ctx, cancelled.TaskNo, store.Scope{Admin: true}); err != nil {
		t.Fatal(err)
	}
	for _, mark := range []struct {
		task    *store.Task
		attempt int
	}{{waiting, waiting.Attempt}, {otherAttempt, otherAttempt.Attempt + 1}, {cancelled, cancelled.Attempt}} {
		if err := f.S.MarkEnqueued(ctx, mark.task.ID, mark.attempt); err != nil {
			t.Fatal(err)
		}
	}
	if f.Get(waiting.ID).EnqueuedAt == nil {
		t.Fatal("the task handed over is still flagged as not enqueued")
	}
	if f.Get(otherAttempt.ID).EnqueuedAt != nil || f.Get(cancelled.ID).EnqueuedAt != nil {
		t.Fatal("a mark for another attempt, or for a task no longer waiting, changed the row")
	}
	orphans, err := f.S.TakeOrphans(ctx, time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0].ID != otherAttempt.ID {
		t.Fatalf("the orphan step took %d tasks, want only the one still flagged", len(orphans))
	}
}
