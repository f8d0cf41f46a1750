package store_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

const takeover = storetest.Takeover

// fixture is store/internal/storetest's, with the steps only store's own tests take.
type fixture struct{ *storetest.Fixture }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return &fixture{storetest.New(t)}
}

// staleHeartbeat makes a RUNNING task look abandoned.
func (f *fixture) staleHeartbeat(id int64) {
	f.T.Helper()
	f.Exec("UPDATE tasks SET heartbeat_at = now() - interval '1 hour' WHERE id = ?", id)
}

// takenOver returns a RUNNING task whose first attempt went silent and was taken over by w2:
// zombie is the superseded attempt's lease, live the new one's.
func (f *fixture) takenOver() (task *store.Task, zombie, live store.Lease) {
	f.T.Helper()
	task, zombie = f.inStatus(store.StatusRunning)
	f.staleHeartbeat(task.ID)
	return task, zombie, f.Claim(task, "w2")
}

// cancel cancels alice's task through the API (a request, when it runs) and fails the test
// if it is refused.
func (f *fixture) cancel(task *store.Task) {
	f.T.Helper()
	if _, err := f.S.Cancel(context.Background(), task.TaskNo, store.Scope{Owner: "alice"}); err != nil {
		f.T.Fatalf("cancel %s: %v", task.TaskNo, err)
	}
}

// inStatus returns a task in the given status, reached through real transitions, plus the
// lease of its latest attempt (zero when it never ran).
func (f *fixture) inStatus(st store.Status) (*store.Task, store.Lease) {
	f.T.Helper()
	ctx := context.Background()
	task := f.Task()
	if st == store.StatusPending {
		return f.Get(task.ID), store.Lease{}
	}
	if st == store.StatusCancelled {
		f.cancel(task)
		return f.Get(task.ID), store.Lease{}
	}
	l := f.Claim(task, "w1")
	var err error
	switch st {
	case store.StatusRunning:
	case store.StatusRetryWait:
		_, err = f.S.EndRetryWait(ctx, l, "transient", "db blip", time.Hour)
	case store.StatusSuccess, store.StatusPartialSuccess:
		_, err = f.S.EndFinished(ctx, l, store.Outcome{Status: st})
	case store.StatusFailed:
		_, err = f.S.EndFailed(ctx, l, "bad_input", "broken")
	case store.StatusTimeout:
		_, err = f.S.EndTimedOut(ctx, l, "too long")
	default:
		f.T.Fatalf("no route to %s", st)
	}
	if err != nil {
		f.T.Fatalf("drive to %s: %v", st, err)
	}
	return f.Get(task.ID), l
}

func TestClaimRaceHasExactlyOneWinner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, from := range []store.Status{store.StatusPending, store.StatusRunning} {
		t.Run("from "+string(from), func(t *testing.T) {
			task := f.Task()
			if from == store.StatusRunning {
				f.Claim(task, "dead-worker")
				f.staleHeartbeat(task.ID)
			}
			const racers = 16
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				winners []string
				start   = make(chan struct{})
			)
			for i := range racers {
				wg.Go(func() {
					<-start
					w := fmt.Sprintf("w%d", i)
					_, err := f.S.ClaimTask(context.Background(), task.ID, w, takeover)
					var nc *store.NotClaimableError
					switch {
					case err == nil:
						mu.Lock()
						winners = append(winners, w)
						mu.Unlock()
					case errors.As(err, &nc):
					default:
						t.Errorf("claim %s: unexpected error %v", w, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(winners) != 1 {
				t.Fatalf("winners = %v, want exactly one", winners)
			}
			got := f.Get(task.ID)
			wantAttempt := 1
			if from == store.StatusRunning {
				wantAttempt = 2
			}
			if got.Status != store.StatusRunning || got.Attempt != wantAttempt || got.Worker != winners[0] {
				t.Fatalf("after race: status=%s attempt=%d worker=%s; want RUNNING, %d, %s", got.Status, got.Attempt, got.Worker, wantAttempt, winners[0])
			}
			runs, err := f.S.Runs(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != wantAttempt {
				t.Fatalf("runs = %d, want %d", len(runs), wantAttempt)
			}
		})
	}
}

func TestClaimRefusesLiveRunningAndNotYetDue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()

	running := f.Task()
	f.Claim(running, "w1")
	_, err := f.S.ClaimTask(ctx, running.ID, "w2", takeover)
	var nc *store.NotClaimableError
	if !errors.As(err, &nc) || nc.Status != store.StatusRunning || nc.RetryIn <= 0 || nc.RetryIn > takeover {
		t.Fatalf("claim of a live RUNNING task: %v, want busy with RetryIn within the takeover window", err)
	}

	waiting, _ := f.inStatus(store.StatusRetryWait)
	_, err = f.S.ClaimTask(ctx, waiting.ID, "w2", takeover)
	if !errors.As(err, &nc) || nc.Status != store.StatusRetryWait || nc.RetryIn < 50*time.Minute {
		t.Fatalf("claim before next_retry_at: %v, want not due for about an hour", err)
	}
	f.Exec("UPDATE tasks SET next_retry_at = now() - interval '1 second' WHERE id = ?", waiting.ID)
	c, err := f.S.ClaimTask(ctx, waiting.ID, "w2", takeover)
	if err != nil || c.Trigger != "retry" || c.Lease.Attempt != 2 {
		t.Fatalf("claim when due: %+v %v, want attempt 2 triggered by retry", c, err)
	}

	if _, err := f.S.ClaimTask(ctx, 999999, "w2", takeover); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim of a missing task: %v", err)
	}
}

// Every transition, tried from every status: only the arrows of the state machine (docs/design.md) may succeed.
func TestForbiddenTransitionsAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := store.Scope{Owner: "alice"}

	type op struct {
		name    string
		allowed []store.Status
		run     func(task *store.Task, l store.Lease) error
	}
	// Worker ops act with the task's latest lease; from statuses that never ran, they use a
	// made-up attempt 1, which must be refused as well.
	lease := func(task *store.Task, l store.Lease) store.Lease {
		if l.Attempt == 0 {
			return store.Lease{TaskID: task.ID, TaskNo: task.TaskNo, Attempt: 1}
		}
		return l
	}
	ops := []op{
		{"claim", []store.Status{store.StatusPending}, func(task *store.Task, _ store.Lease) error {
			_, err := f.S.ClaimTask(ctx, task.ID, "w9", takeover)
			return err
		}},
		{"heartbeat", []store.Status{store.StatusRunning}, func(task *store.Task, l store.Lease) error {
			_, err := f.S.Heartbeat(ctx, lease(task, l))
			return err
		}},
		{"progress", []store.Status{store.StatusRunning}, func(task *store.Task, l store.Lease) error {
			_, err := f.S.Progress(ctx, lease(task, l), 1, 2)
			return err
		}},
		{"commit batch", []store.Status{store.StatusRunning}, func(task *store.Task, l store.Lease) error {
			_, err := f.S.CommitBatch(ctx, lease(task, l), func(context.Context, bun.Tx) (store.Batch, error) {
				return store.Batch{SuccessDelta: 1}, nil
			})
			return err
		}},
		{"succeed", []store.Status{store.StatusRunning}, func(task *store.Task, l store.Lease) error {
			_, err := f.S.EndFinished(ctx, lease(task, l), store.Outcome{Status: store.StatusSuccess})
			return err
		}},
		{"fail", []store.Status{store.StatusRunning}, func(task *store.Task, l store.Lease) error {
			_, err := f.S.EndFailed(ctx, lease(task, l), "x", "y")
			return err
		}},
		{"retry later", []store.Status{store.StatusRunning}, func(task *store.Task, l store.Lease) error {
			_, err := f.S.EndRetryWait(ctx, lease(task, l), "x", "y", time.Second)
			return err
		}},
		{"release", []store.Status{store.StatusRunning}, func(task *store.Task, l store.Lease) error {
			_, err := f.S.EndInterrupted(ctx, lease(task, l), "shutdown")
			return err
		}},
		{"time out", []store.Status{store.StatusRunning}, func(task *store.Task, l store.Lease) error {
			_, err := f.S.EndTimedOut(ctx, lease(task, l), "slow")
			return err
		}},
		{"cancel (API)", []store.Status{store.StatusPending, store.StatusRetryWait, store.StatusRunning}, func(task *store.Task, _ store.Lease) error {
			_, err := f.S.Cancel(ctx, task.TaskNo, alice)
			return err
		}},
		{"retry (API)", []store.Status{store.StatusFailed, store.StatusTimeout, store.StatusCancelled}, func(task *store.Task, _ store.Lease) error {
			_, err := f.S.Retry(ctx, task.TaskNo, alice)
			return err
		}},
	}
	for _, o := range ops {
		for _, from := range task.AllStatuses {
			allowed := false
			for _, a := range o.allowed {
				allowed = allowed || a == from
			}
			t.Run(fmt.Sprintf("%s from %s", o.name, from), func(t *testing.T) {
				task, l := f.inStatus(from)
				before := f.Get(task.ID)
				err := o.run(task, l)
				after := f.Get(task.ID)
				if allowed {
					if err != nil {
						t.Fatalf("allowed transition refused: %v", err)
					}
					return
				}
				var nc *store.NotClaimableError
				var ce *store.ConflictError
				if !errors.Is(err, store.ErrFenced) && !errors.As(err, &nc) && !errors.As(err, &ce) {
					t.Fatalf("forbidden transition: err = %v, want a refusal", err)
				}
				if after.Status != before.Status || after.Attempt != before.Attempt || after.UpdatedAt != before.UpdatedAt {
					t.Fatalf("refused transition changed the task: %s#%d → %s#%d", before.Status, before.Attempt, after.Status, after.Attempt)
				}
			})
		}
	}
}

func TestSupersededAttemptWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task := f.Task()
	zombie := f.Claim(task, "zombie")
	if _, err := f.S.Progress(ctx, zombie, 10, 100); err != nil {
		t.Fatal(err)
	}
	f.staleHeartbeat(task.ID)
	c, err := f.S.ClaimTask(ctx, task.ID, "rescuer", takeover)
	if err != nil || c.Trigger != "takeover" || c.Lease.Attempt != 2 {
		t.Fatalf("takeover: %+v %v", c, err)
	}
	if _, err := f.S.Progress(ctx, c.Lease, 20, 100); err != nil {
		t.Fatal(err)
	}
	before := f.Get(task.ID)

	writes := map[string]func() error{
		"heartbeat": func() error { _, err := f.S.Heartbeat(ctx, zombie); return err },
		"progress":  func() error { _, err := f.S.Progress(ctx, zombie, 99, 100); return err },
		"succeed": func() error {
			_, err := f.S.EndFinished(ctx, zombie, store.Outcome{Status: store.StatusSuccess, Result: json.RawMessage(`{"file":"x"}`)})
			return err
		},
		"fail":        func() error { _, err := f.S.EndFailed(ctx, zombie, "x", "zombie says no"); return err },
		"retry later": func() error { _, err := f.S.EndRetryWait(ctx, zombie, "x", "y", time.Second); return err },
		"release":     func() error { _, err := f.S.EndInterrupted(ctx, zombie, "bye"); return err },
		"commit batch": func() error {
			_, err := f.S.CommitBatch(ctx, zombie, func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
				_, err := tx.ExecContext(ctx, "INSERT INTO customers (code, name, phone) VALUES ('Z1', 'zombie', '13800138000')")
				return store.Batch{SuccessDelta: 1000, Checkpoint: json.RawMessage(`{"row":1000}`)}, err
			})
			return err
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, store.ErrFenced) {
			t.Errorf("zombie %s: err = %v, want ErrFenced", name, err)
		}
	}
	after := f.Get(task.ID)
	if after.Status != store.StatusRunning || after.Attempt != 2 || after.Worker != "rescuer" ||
		after.ProgressCurrent != before.ProgressCurrent || after.SuccessCount != 0 || len(after.Checkpoint) != 0 ||
		after.UpdatedAt != before.UpdatedAt || !after.HeartbeatAt.Equal(*before.HeartbeatAt) {
		t.Fatalf("zombie writes changed the task:\nbefore %+v\nafter  %+v", before, after)
	}
	var customers int
	if err := f.DB.NewRaw("SELECT count(*) FROM customers").Scan(ctx, &customers); err != nil || customers != 0 {
		t.Fatalf("zombie batch wrote %d customers (err %v)", customers, err)
	}
	runs, err := f.S.Runs(ctx, task.ID)
	if err != nil || len(runs) != 2 || runs[0].Status != "SUPERSEDED" || runs[1].Status != "RUNNING" || runs[1].Trigger != "takeover" {
		t.Fatalf("runs = %+v (err %v), want attempt 1 SUPERSEDED and attempt 2 RUNNING by takeover", runs, err)
	}
	// The rightful owner still finishes.
	if _, err := f.S.EndFinished(ctx, c.Lease, store.Outcome{Status: store.StatusSuccess}); err != nil {
		t.Fatal(err)
	}
}

func TestTerminalStaysTerminal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, st := range []store.Status{store.StatusSuccess, store.StatusPartialSuccess, store.StatusFailed, store.StatusTimeout, store.StatusCancelled} {
		t.Run(string(st), func(t *testing.T) {
			task, l := f.inStatus(st)
			if l.Attempt == 0 {
				l = store.Lease{TaskID: task.ID, TaskNo: task.TaskNo, Attempt: task.Attempt}
			}
			f.Exec("UPDATE tasks SET heartbeat_at = now() - interval '1 day' WHERE id = ?", task.ID)
			var nc *store.NotClaimableError
			if _, err := f.S.ClaimTask(ctx, task.ID, "late-delivery", takeover); !errors.As(err, &nc) || nc.RetryIn != 0 {
				t.Fatalf("claim of a %s task: %v, want refused for good", st, err)
			}
			for _, err := range []error{
				func() error {
					_, err := f.S.EndFinished(ctx, l, store.Outcome{Status: store.StatusSuccess})
					return err
				}(),
				func() error { _, err := f.S.EndFailed(ctx, l, "x", "y"); return err }(),
				func() error { _, err := f.S.EndTimedOut(ctx, l, "y"); return err }(),
			} {
				if !errors.Is(err, store.ErrFenced) {
					t.Fatalf("worker write to a %s task: %v, want ErrFenced", st, err)
				}
			}
			var ce *store.ConflictError
			if _, err := f.S.Cancel(ctx, task.TaskNo, store.Scope{Owner: "alice"}); !errors.As(err, &ce) {
				t.Fatalf("cancel of a %s task: %v, want conflict", st, err)
			}
			if got := f.Get(task.ID); got.Status != st {
				t.Fatalf("status moved from %s to %s", st, got.Status)
			}
		})
	}
}

func TestCancelAndRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := store.Scope{Owner: "alice"}

	t.Run("cancel of a running task is a request the worker honours", func(t *testing.T) {
		task := f.Task()
		l := f.Claim(task, "w1")
		res, err := f.S.Cancel(ctx, task.TaskNo, alice)
		if err != nil || res.Immediate || res.Task.Status != store.StatusRunning || !res.Task.CancelRequested {
			t.Fatalf("cancel running: %+v %v", res, err)
		}
		if req, err := f.S.Heartbeat(ctx, l); err != nil || !req {
			t.Fatalf("heartbeat after cancel: requested=%v err=%v", req, err)
		}
		if _, err := f.S.EndCancelled(ctx, l); err != nil {
			t.Fatal(err)
		}
		if got := f.Get(task.ID); got.Status != store.StatusCancelled || got.FinishedAt == nil {
			t.Fatalf("after worker honours cancel: %s", got.Status)
		}
	})

	t.Run("a worker cannot mark cancelled without a request", func(t *testing.T) {
		task := f.Task()
		l := f.Claim(task, "w1")
		if _, err := f.S.EndCancelled(ctx, l); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("cancelled without request: %v", err)
		}
	})

	t.Run("another user's task is not found", func(t *testing.T) {
		task := f.Task()
		if _, err := f.S.Cancel(ctx, task.TaskNo, store.Scope{Owner: "bob"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("bob cancels alice's task: %v", err)
		}
		if _, err := f.S.Retry(ctx, task.TaskNo, store.Scope{Owner: "bob"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("bob retries alice's task: %v", err)
		}
		if _, err := f.S.Cancel(ctx, task.TaskNo, store.Scope{Owner: "ops", Admin: true}); err != nil {
			t.Fatalf("admin cancels alice's task: %v", err)
		}
	})

	t.Run("retry starts a new attempt and keeps the old records", func(t *testing.T) {
		task, l := f.inStatus(store.StatusFailed)
		retried, err := f.S.Retry(ctx, task.TaskNo, alice)
		if err != nil || retried.Status != store.StatusPending || retried.ErrorMessage != "" || retried.Attempt != l.Attempt {
			t.Fatalf("retry: %+v %v", retried, err)
		}
		c, err := f.S.ClaimTask(ctx, task.ID, "w2", takeover)
		if err != nil || c.Lease.Attempt != 2 || c.Trigger != "manual_retry" {
			t.Fatalf("claim after retry: %+v %v", c, err)
		}
		runs, _ := f.S.Runs(ctx, task.ID)
		if len(runs) != 2 || runs[0].Status != "FAILED" || runs[0].Error != "broken" {
			t.Fatalf("runs after retry = %+v, want the failed attempt kept", runs)
		}
	})

	t.Run("release keeps the retry budget and resumes", func(t *testing.T) {
		task := f.Task()
		l := f.Claim(task, "w1")
		rel, err := f.S.EndInterrupted(ctx, l, "shutting down")
		if err != nil || rel.Status != store.StatusRetryWait || rel.RetryCount != 0 {
			t.Fatalf("release: %+v %v", rel, err)
		}
		c, err := f.S.ClaimTask(ctx, task.ID, "w2", takeover)
		if err != nil || c.Trigger != "resume" {
			t.Fatalf("claim after release: %+v %v", c, err)
		}
	})
}

func TestCreateIsIdempotentPerOwnerTypeAndKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const n = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		ids     = map[int64]bool{}
	)
	for range n {
		wg.Go(func() {
			task, c, err := f.S.Create(ctx, store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "import:customers", Owner: "alice",
				Queue: "imports", BizKey: "sha256:abc", MaxRetry: 3, TimeoutSeconds: 60})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[task.ID] = true
			if c {
				created++
			}
		})
	}
	wg.Wait()
	if created != 1 || len(ids) != 1 {
		t.Fatalf("created=%d distinct=%d, want one task for %d identical submits", created, len(ids), n)
	}
	other, c, err := f.S.Create(ctx, store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "import:customers", Owner: "bob",
		Queue: "imports", BizKey: "sha256:abc", MaxRetry: 3, TimeoutSeconds: 60})
	if err != nil || !c || ids[other.ID] {
		t.Fatalf("another owner with the same key must get their own task: %v %v", c, err)
	}
}

// A retry sent while the task's cancel is being honoured either finds it still RUNNING (409
// saying so) or retries it: it is never refused with a status the retry accepts, which is what
// a retry whose statement read the task just before the ending committed used to answer
// ("cannot retry a task that is CANCELLED").
func TestRetryRacingTheCancelledEndingIsNeverRefusedForARetryableStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := range 150 {
		task := f.Task()
		lease := f.Claim(task, "w1")
		if _, err := f.S.Cancel(ctx, task.TaskNo, store.Scope{Admin: true}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(time.Duration(i%7) * 100 * time.Microsecond)
			if _, err := f.S.EndCancelled(ctx, lease); err != nil {
				t.Error(err)
			}
		})
		var retried bool
		for !retried {
			_, err := f.S.Retry(ctx, task.TaskNo, store.Scope{Admin: true})
			var conflict *store.ConflictError
			switch {
			case err == nil:
				retried = true
			case errors.As(err, &conflict) && conflict.Status == store.StatusRunning:
				// still ending: ask again, as a user would
			default:
				t.Fatalf("task %d: retry answered %v", i, err)
			}
		}
		wg.Wait()
	}
}
