package jobs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// handlerFunc adapts a function to Handler under the type "test:work".
type handlerFunc func(ctx context.Context, run *Run) (Result, error)

func (handlerFunc) Type() string                                        { return "test:work" }
func (h handlerFunc) Run(ctx context.Context, run *Run) (Result, error) { return h(ctx, run) }

type countingAlerter struct{ testenv.Collector[Alert] }

func (a *countingAlerter) TaskFailed(_ context.Context, al Alert) { a.Add(al) }

type rtFixture struct {
	t       *testing.T
	st      *store.Store
	pg      *storetest.Postgres
	files   storage.Store
	root    string // the data dir
	insp    *asynq.Inspector
	rdb     *redis.Client
	alerter *countingAlerter
	policy  TypePolicy
}

func newRTFixture(t *testing.T, policy TypePolicy) *rtFixture {
	t.Helper()
	pg := storetest.NewPostgres(t)
	rd := testenv.NewRedis(t)
	fs, root := testenv.NewFiles(t, storage.Config{})
	return &rtFixture{t: t, st: store.New(pg.DB), pg: pg, files: fs, root: root, insp: asynq.NewInspectorFromRedisClient(rd.Client), rdb: rd.Client,
		alerter: &countingAlerter{}, policy: policy}
}

func (f *rtFixture) runtime(h Handler, worker string) *Runtime {
	rt := NewRuntime(RuntimeConfig{WorkerID: worker, HeartbeatInterval: 50 * time.Millisecond, TakeoverAfter: 300 * time.Millisecond,
		ProgressInterval: 10 * time.Millisecond, AbandonAfter: 200 * time.Millisecond, Types: map[string]TypePolicy{"test:work": f.policy}},
		RuntimeDeps{Store: f.st, Enqueuer: f.enqueuer(), Board: NewProgressBoard(f.rdb), Files: f.files,
			Alerter: f.alerter, Logger: slog.New(slog.DiscardHandler)})
	rt.Register(h)
	f.t.Cleanup(rt.Close)
	return rt
}

// enqueuer enqueues into the fixture's Redis.
func (f *rtFixture) enqueuer() *Enqueuer {
	return NewEnqueuer(asynq.NewClientFromRedisClient(f.rdb), f.insp, nil)
}

// submitter submits "test:work" tasks under policy through the fixture's enqueuer.
func (f *rtFixture) submitter(policy SubmitPolicy) *Submitter {
	return NewSubmitter(f.st, f.enqueuer(), map[string]SubmitPolicy{"test:work": policy}, nil, nil, slog.New(slog.DiscardHandler), nil)
}

// workers starts asynq workers that hand the queue "work" to rt, slots at a time, its lanes
// in strict priority order.
func (f *rtFixture) workers(rt *Runtime, slots int) *Workers {
	f.t.Helper()
	w := NewWorkers(f.rdb, map[string]QueueConfig{"work": {Concurrency: slots, StrictPriority: true}}, time.Second, 10*time.Millisecond,
		slog.New(slog.DiscardHandler), nil)
	if err := w.Start(rt, nil); err != nil {
		f.t.Fatal(err)
	}
	return w
}

// task creates a PENDING test task.
func (f *rtFixture) task() *store.Task {
	f.t.Helper()
	task, _, err := f.st.Create(context.Background(), store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "test:work", Owner: "alice",
		Queue: "work", MaxRetry: f.policy.MaxRetry, TimeoutSeconds: 1800,
		RetryBase: f.policy.RetryBase, MaxRuntime: f.policy.MaxRuntime, StallAfter: f.policy.StallAfter})
	if err != nil {
		f.t.Fatal(err)
	}
	return task
}

// deliver hands the task to rt as asynq would.
func deliver(rt *Runtime, t *store.Task) error {
	body, _ := json.Marshal(payload{TaskID: t.ID, TaskNo: t.TaskNo, Attempt: t.Attempt})
	return rt.ProcessTask(context.Background(), asynq.NewTask("test:work", body))
}

func (f *rtFixture) get(id int64) *store.Task {
	f.t.Helper()
	return storetest.Get(f.t, f.st, id)
}

// A handler blocked in a call that ignores its context: liveness follows progress, so the
// attempt is stopped after stall_after, the task ends TIMEOUT saying where it stalled, and
// the asynq slot is freed; what the handler makes when it finally returns is discarded.
func TestHandlerBlockedForeverEndsTimeoutAfterStallAfter(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour, StallAfter: 400 * time.Millisecond})
	release := make(chan struct{})
	var made atomic.Bool
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		if err := run.Progress(ctx, 5, 20); err != nil {
			return Result{}, err
		}
		<-release // blocked, deaf to ctx
		tmp, _ := f.files.CreateTemp("late", ".xlsx")
		leftover := storage.Results + "/late.xlsx"
		if _, err := f.files.Commit(context.Background(), tmp, leftover, ""); err != nil {
			t.Error(err)
		}
		made.Store(true)
		return Result{Files: []string{leftover}}, nil
	}), "w1")
	task := f.task()
	start := time.Now()
	if err := deliver(rt, task); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	took := time.Since(start)
	got := f.get(task.ID)
	if got.Status != store.StatusTimeout || !strings.Contains(got.ErrorMessage, "stalled") || !strings.Contains(got.ErrorMessage, "5 of 20") {
		t.Fatalf("task = %s %q", got.Status, got.ErrorMessage)
	}
	if took > 3*time.Second {
		t.Fatalf("the blocked attempt held its slot for %s", took)
	}
	close(release)
	abs := filepath.Join(f.root, storage.Results, "late.xlsx")
	testenv.Eventually(t, 5*time.Second, "the abandoned handler's file to be discarded", func() bool {
		if !made.Load() {
			return false
		}
		_, err := os.Stat(abs)
		return errors.Is(err, os.ErrNotExist)
	})
	// TIMEOUT is retryable by the user.
	if _, err := f.st.Retry(context.Background(), task.TaskNo, store.Scope{Owner: "alice"}); err != nil {
		t.Fatalf("retry after a stall: %v", err)
	}
}

// Progress keeps a slow attempt alive: stalling is about progress, not duration.
func TestProgressingAttemptIsNotStalled(t *testing.T) {
	t.Parallel()
	// The attempt runs about 8 s, more than twice stall_after, reporting every 100 ms. A
	// stall_after of 1.5 s was passed on a loaded machine by one late progress write.
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour, StallAfter: 3 * time.Second})
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		for i := range 80 {
			time.Sleep(100 * time.Millisecond)
			if err := run.Progress(ctx, int64(i), 80); err != nil {
				return Result{}, err
			}
		}
		return Result{}, nil
	}), "w1")
	task := f.task()
	if err := deliver(rt, task); err != nil {
		t.Fatal(err)
	}
	if got := f.get(task.ID); got.Status != store.StatusSuccess {
		t.Fatalf("status = %s %q", got.Status, got.ErrorMessage)
	}
}

// A progress write that waits past the lock timeout on a task row someone else holds is
// skipped, not the end of the attempt: the attempt goes on and ends SUCCESS on its first
// attempt, with the progress of the writes that got through.
func TestAProgressWriteTimedOutOnAHeldRowKeepsTheAttempt(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour})
	db, err := store.Open(f.pg.URL, store.OpenOptions{MaxOpenConns: 8, LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f.st = store.New(db)
	held, skipped, released := make(chan struct{}), make(chan struct{}), make(chan struct{})
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		if err := run.Progress(ctx, 1, 3); err != nil {
			return Result{}, err
		}
		held <- struct{}{} // the test takes the row's lock
		<-held
		if err := run.Progress(ctx, 2, 3); err != nil {
			return Result{}, err
		}
		close(skipped)
		<-released
		return Result{}, run.Progress(ctx, 3, 3)
	}), "w1")
	task := f.task()
	done := make(chan error, 1)
	go func() { done <- deliver(rt, task) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the attempt ended before its first progress write: %v", err)
	}
	ctx := context.Background()
	tx, err := f.pg.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM tasks WHERE id = ? FOR UPDATE`, task.ID); err != nil {
		t.Fatal(err)
	}
	held <- struct{}{}
	select {
	case <-skipped:
	case err := <-done:
		tx.Rollback() //nolint:errcheck
		t.Fatalf("the attempt ended on a progress write that waited for a held row: %v (%s)", err, f.get(task.ID).ErrorMessage)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	close(released)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := f.get(task.ID)
	if got.Status != store.StatusSuccess || got.Attempt != 1 || got.ProgressCurrent != 3 {
		t.Fatalf("status %s, attempt %d, progress %d: want SUCCESS on attempt 1 at 3 (%q)", got.Status, got.Attempt, got.ProgressCurrent, got.ErrorMessage)
	}
}

// A user cancels a running task, then the attempt hits a transient error: the task ends
// CANCELLED and nothing is enqueued to run it again.
func TestCancelledTaskIsNeverRetriedWhateverErrorFollows(t *testing.T) {
	t.Parallel()
	for name, fail := range map[string]error{
		"transient": errors.New("connection reset by peer"),
		"bad input": BadInput("bad", "broken row"),
		"panic":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Millisecond, MaxRuntime: time.Hour})
			rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
				if _, err := f.st.Cancel(ctx, run.Task.TaskNo, store.Scope{Owner: "alice"}); err != nil {
					return Result{}, err
				}
				if fail == nil {
					panic("boom")
				}
				return Result{}, fail
			}), "w1")
			task := f.task()
			deliver(rt, task) //nolint:errcheck // the outcome is in the row
			got := f.get(task.ID)
			if got.Status != store.StatusCancelled || got.RetryCount != 0 {
				t.Fatalf("task = %s retries %d", got.Status, got.RetryCount)
			}
			for _, lane := range Lanes("work") {
				if _, err := f.insp.GetTaskInfo(lane, JobID(task.TaskNo, got.Attempt)); err == nil {
					t.Fatalf("a cancelled task was enqueued again in %s", lane)
				}
			}
			if f.alerter.Len() != 0 {
				t.Fatal("a cancelled task raised an alert")
			}
		})
	}
}

// Retries used up: FAILED with exactly one alert, recorded on the row, so neither a second
// delivery nor the cleanup's sweep of due alerts sends it again.
func TestExhaustedTaskAlertsOnce(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 0, RetryBase: time.Millisecond, MaxRuntime: time.Hour})
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		return Result{}, errors.New("dependency down")
	}), "w1")
	task := f.task()
	deliver(rt, task) //nolint:errcheck
	if got := f.get(task.ID); got.Status != store.StatusFailed || got.AlertedAt == nil {
		t.Fatalf("task = %+v", got)
	}
	deliver(rt, task) //nolint:errcheck // a duplicate delivery
	rt.SendAlert(context.Background(), task.ID)
	due, err := f.st.ClaimDueAlerts(context.Background(), 0, 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("due alerts after sending: %v %v", due, err)
	}
	if alerts := f.alerter.Since(0); len(alerts) != 1 || alerts[0].TaskNo != task.TaskNo {
		t.Fatalf("alerts = %+v, want exactly one", alerts)
	}
}

// The terminal write's first commit succeeded but its reply was lost; the retry finds the row
// fenced. The row shows this attempt's own success, so the result is kept, not deleted.
func TestAmbiguousCommitKeepsTheCommittedResult(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour})
	rt := f.runtime(handlerFunc(func(context.Context, *Run) (Result, error) { return Result{}, nil }), "w1")
	task := f.task()
	c, err := f.st.ClaimTask(context.Background(), task.ID, "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tries := 0
	got, err := rt.persist(context.Background(), c.Lease, []store.Status{store.StatusSuccess}, func(ctx context.Context) (*store.Task, error) {
		tries++
		row, err := f.st.EndFinished(ctx, c.Lease, store.Outcome{Status: store.StatusSuccess, Result: []byte(`{"file":"results/x.xlsx"}`)})
		if tries == 1 && err == nil {
			return nil, io.ErrUnexpectedEOF // committed, but the reply never arrived
		}
		return row, err
	})
	if err != nil || got == nil || got.Status != store.StatusSuccess || tries != 2 {
		t.Fatalf("persist = %+v, %v after %d tries; want the committed success", got, err, tries)
	}
	// A write fenced on its first try is somebody else's ending: still refused.
	other := f.task()
	c2, _ := f.st.ClaimTask(context.Background(), other.ID, "w1", time.Minute)
	if _, err := f.st.EndTimedOut(context.Background(), c2.Lease, "cleanup got there first"); err != nil {
		t.Fatal(err)
	}
	_, err = rt.persist(context.Background(), c2.Lease, []store.Status{store.StatusSuccess}, func(ctx context.Context) (*store.Task, error) {
		return f.st.EndFinished(ctx, c2.Lease, store.Outcome{Status: store.StatusSuccess})
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("persist over a timed-out task = %v, want fenced", err)
	}
}

// A takeover deletes the partial files of the attempt it replaces (an excelize spill left by
// a killed export held ~67 MB each); the new attempt's own files are kept until it ends.
func TestTakeoverRemovesTheDeadAttemptsTempFiles(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour})
	task := f.task()
	if _, err := f.st.ClaimTask(context.Background(), task.ID, "killed", time.Minute); err != nil {
		t.Fatal(err)
	}
	dead, _ := f.files.CreateTemp(storage.AttemptPrefix(task.TaskNo, 1), ".xlsx")
	os.WriteFile(filepath.Join(filepath.Dir(dead.Name()), "excelize-spill"), []byte("spill"), 0o600) //nolint:errcheck
	dead.Close()
	var sawOwn bool
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		own, err := f.files.CreateTemp(storage.AttemptPrefix(run.Task.TaskNo, run.Lease.Attempt), ".xlsx")
		if err != nil {
			return Result{}, err
		}
		defer storage.Discard(own)
		if _, err := os.Stat(dead.Name()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the dead attempt's partial file survived the takeover")
		}
		_, err = os.Stat(own.Name())
		sawOwn = err == nil
		return Result{}, nil
	}), "w2")
	time.Sleep(400 * time.Millisecond) // the killed attempt's heartbeat goes stale
	if err := deliver(rt, f.get(task.ID)); err != nil {
		t.Fatal(err)
	}
	if got := f.get(task.ID); got.Status != store.StatusSuccess || got.Attempt != 2 || !sawOwn {
		t.Fatalf("task = %s attempt %d (own file seen: %v)", got.Status, got.Attempt, sawOwn)
	}
	entries, _ := os.ReadDir(f.files.TempDir())
	if len(entries) != 0 {
		t.Fatalf("temp area after the task ended: %v", entries)
	}
}

// countingFiles counts the scratch scans for an ended task's leftovers.
type countingFiles struct {
	storage.Store
	scans atomic.Int32
}

func (c *countingFiles) RemoveAttemptTemp(taskNo string, keep int) (int, error) {
	c.scans.Add(1)
	return c.Store.RemoveAttemptTemp(taskNo, keep)
}

// The end of a task deletes the scratch files its attempt named with run.TempPrefix and left
// behind (a handler that returned without discarding its spill); a first attempt that never
// asked for a prefix has none, and its end does not scan the scratch directory for them.
func TestTaskEndRemovesTheTempFilesItsAttemptLeft(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour})
	files := &countingFiles{Store: f.files}
	f.files = files
	leaky, plain := f.task(), f.task()
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		if run.Task.ID != leaky.ID {
			return Result{}, nil
		}
		tmp, err := f.files.CreateTemp(run.TempPrefix(), ".xlsx")
		if err != nil {
			return Result{}, err
		}
		_, err = tmp.WriteString("spill")
		tmp.Close()
		return Result{}, err // left behind on purpose
	}), "w1")
	if err := deliver(rt, f.get(plain.ID)); err != nil {
		t.Fatal(err)
	}
	if n := files.scans.Load(); n != 0 {
		t.Fatalf("a first attempt that made no temp files scanned the scratch directory %d times", n)
	}
	if err := deliver(rt, f.get(leaky.ID)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{leaky.ID, plain.ID} {
		if got := f.get(id); got.Status != store.StatusSuccess {
			t.Fatalf("task %d = %s", id, got.Status)
		}
	}
	if entries, _ := os.ReadDir(f.files.TempDir()); len(entries) != 0 {
		t.Fatalf("temp area after the task ended: %v", entries)
	}
}

// Live streams hear of progress and of every committed status change on one channel: a
// started attempt, its progress, and its end, in that order.
func TestRuntimeAnnouncesProgressAndCommittedChanges(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour})
	sub := f.rdb.Subscribe(context.Background(), EventsChannel)
	defer sub.Close()
	if _, err := sub.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		return Result{}, run.Progress(ctx, 3, 4)
	}), "w1")
	task := f.task()
	if err := deliver(rt, task); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for len(kinds) < 3 {
		select {
		case msg := <-sub.Channel():
			var n Notice
			if err := json.Unmarshal([]byte(msg.Payload), &n); err != nil {
				t.Fatalf("notice %q: %v", msg.Payload, err)
			}
			if n.TaskNo != task.TaskNo {
				continue // another test's task: the channel is shared by every test on this Redis
			}
			if n.Owner != "alice" {
				t.Fatalf("notice %q", msg.Payload)
			}
			kinds = append(kinds, n.Kind)
		case <-time.After(5 * time.Second):
			t.Fatalf("notices so far: %v", kinds)
		}
	}
	if kinds[0] != NoticeChanged || kinds[1] != NoticeProgress || kinds[2] != NoticeChanged {
		t.Fatalf("notices = %v, want changed (started), progress, changed (ended)", kinds)
	}
}

// The worker's retry decision reads the policy fixed on the task's row at submit, not the
// config of the process that happens to run it: a config changed after submit, or a replica
// with another config, gives the task neither more nor fewer retries than it was submitted with.
func TestRetriesFollowThePolicyOnTheRowNotTheWorkersConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ row, config int }{{row: 2, config: 0}, {row: 0, config: 3}} {
		t.Run(fmt.Sprintf("row %d, worker config %d", tc.row, tc.config), func(t *testing.T) {
			t.Parallel()
			f := newRTFixture(t, TypePolicy{MaxRetry: tc.config, RetryBase: time.Millisecond, MaxRuntime: time.Hour})
			rt := f.runtime(handlerFunc(func(context.Context, *Run) (Result, error) {
				return Result{}, errors.New("dependency down")
			}), "w1")
			task, _, err := f.st.Create(context.Background(), store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "test:work", Owner: "alice",
				Queue: "work", MaxRetry: tc.row, TimeoutSeconds: 1800, RetryBase: time.Millisecond, MaxRuntime: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 30*time.Second, "the task to run out of retries", func() bool {
				deliver(rt, task) //nolint:errcheck // the outcome is in the row
				return f.get(task.ID).Status.Terminal()
			})
			got := f.get(task.ID)
			want := fmt.Sprintf("gave up after %d retries", tc.row)
			if got.Status != store.StatusFailed || got.RetryCount != tc.row || got.Attempt != tc.row+1 || !strings.Contains(got.ErrorMessage, want) {
				t.Fatalf("%s after %d attempts, retry_count %d, %q; want FAILED after %d attempts saying %q",
					got.Status, got.Attempt, got.RetryCount, got.ErrorMessage, tc.row+1, want)
			}
		})
	}
}
