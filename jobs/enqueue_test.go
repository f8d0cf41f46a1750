package jobs

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// serve runs an asynq server on queue "work" whose deliveries go through handle, until the
// test ends.
func (f *rtFixture) serve(concurrency int, handle asynq.HandlerFunc) {
	f.t.Helper()
	srv := asynq.NewServerFromRedisClient(f.rdb, asynq.Config{Concurrency: concurrency, Queues: LaneWeights("work"),
		TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.Handle("test:work", handle)
	if err := srv.Start(mux); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(srv.Shutdown)
}

// A task cancelled while never claimed and then retried waits again under the same attempt
// number, so its job id is the one a delivery may still hold. When that delivery read the task
// while it was CANCELLED, it ends without claiming; the retry must still run, once, without
// waiting for the rescuer (which this test does not run). Both orders of the delivery's claim
// and the retry are checked.
func TestRetryOfATaskCancelledWhileItsJobWasDeliveredRunsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		retryBefore bool // the retry commits before the delivery claims (else after it looked)
	}{
		{name: "retry after the delivery found it cancelled", retryBefore: false},
		{name: "retry before the delivery claims", retryBefore: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newRTFixture(t, TypePolicy{MaxRetry: 0, RetryBase: time.Second, MaxRuntime: time.Hour})
			var ran atomic.Int32
			rt := f.runtime(handlerFunc(func(context.Context, *Run) (Result, error) {
				ran.Add(1)
				return Result{}, nil
			}), "w1")
			enq := f.enqueuer()
			ctx := context.Background()
			task := f.task()
			if err := enq.Enqueue(ctx, task); err != nil {
				t.Fatal(err)
			}
			var (
				deliveries atomic.Int32
				delivered  = make(chan struct{}) // the first delivery holds the job
				claim      = make(chan struct{}) // let it run the runtime
				looked     = make(chan struct{}) // the runtime is done with it; the job is still active
				finish     = make(chan struct{}) // hand the job back to asynq
			)
			f.serve(2, func(ctx context.Context, job *asynq.Task) error {
				if deliveries.Add(1) > 1 {
					return rt.ProcessTask(ctx, job)
				}
				close(delivered)
				<-claim
				err := rt.ProcessTask(ctx, job)
				close(looked)
				<-finish
				return err
			})
			<-delivered
			if res, err := f.st.Cancel(ctx, task.TaskNo, store.Scope{Admin: true}); err != nil || !res.Immediate {
				t.Fatalf("cancel: %+v, %v", res, err)
			}
			retry := func() {
				retried, err := f.st.Retry(ctx, task.TaskNo, store.Scope{Admin: true})
				if err != nil {
					t.Fatal(err)
				}
				// The job is active: a second one is added.
				if created, err := enq.EnqueueNew(ctx, retried); err != nil || !created {
					t.Fatalf("enqueue of the retried task while its job is active: created %v, %v", created, err)
				}
			}
			if tc.retryBefore {
				retry()
				close(claim)
				<-looked
			} else {
				close(claim)
				<-looked
				if got := f.get(task.ID).Status; got != store.StatusCancelled {
					t.Fatalf("after the first delivery: %s, want CANCELLED", got)
				}
				retry()
			}
			close(finish)
			testenv.Eventually(t, 15*time.Second, "the retried task to succeed", func() bool {
				return f.get(task.ID).Status == store.StatusSuccess
			})
			time.Sleep(200 * time.Millisecond) // any other delivery has had its turn
			if n := ran.Load(); n != 1 {
				t.Fatalf("the handler ran %d times, want 1", n)
			}
		})
	}
}

// Cancels and retries raced at random against deliveries: every task ends (none is left
// PENDING with no job) and no attempt runs twice.
func TestCancelAndRetryRacedWithDeliveriesLeaveNoTaskBehind(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 0, RetryBase: time.Second, MaxRuntime: time.Hour})
	var (
		mu   sync.Mutex
		runs = map[string]int{} // task_no/attempt → handler runs
	)
	rt := f.runtime(handlerFunc(func(_ context.Context, run *Run) (Result, error) {
		mu.Lock()
		runs[run.Lease.String()]++
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		return Result{}, nil
	}), "w1")
	enq := f.enqueuer()
	f.serve(8, func(ctx context.Context, job *asynq.Task) error {
		time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond)
		return rt.ProcessTask(ctx, job)
	})
	ctx := context.Background()
	const n = 60
	tasks := make([]*store.Task, n)
	var wg sync.WaitGroup
	for i := range tasks {
		tasks[i] = f.task()
		wg.Go(func() {
			task := tasks[i]
			if err := enq.Enqueue(ctx, task); err != nil {
				t.Error(err)
				return
			}
			for range 1 + rand.IntN(3) {
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				if _, err := f.st.Cancel(ctx, task.TaskNo, store.Scope{Admin: true}); err != nil {
					var conflict *store.ConflictError
					if !errors.As(err, &conflict) {
						t.Error(err)
					}
					return // it ran already
				}
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				retried, err := f.st.Retry(ctx, task.TaskNo, store.Scope{Admin: true})
				var conflict *store.ConflictError
				if errors.As(err, &conflict) {
					continue // the cancel is still being honoured by a running attempt
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := enq.Enqueue(ctx, retried); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	testenv.Eventually(t, 30*time.Second, "every task to end", func() bool {
		for _, task := range tasks {
			if !f.get(task.ID).Status.Terminal() {
				return false
			}
		}
		return true
	})
	for _, task := range tasks {
		got := f.get(task.ID)
		if got.Status != store.StatusSuccess && got.Status != store.StatusCancelled {
			t.Errorf("task %s ended %s (%s)", got.TaskNo, got.Status, got.ErrorMessage)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for lease, k := range runs {
		if k != 1 {
			t.Errorf("attempt %s ran %d times", lease, k)
		}
	}
}

// A cancel of a waiting task withdraws its job; a retry keeps the attempt number and so the
// job's id. When the retry commits and enqueues between the cancel's commit and its
// withdrawal, its enqueue finds the old job still waiting and keeps it, and the withdrawal
// then deletes it: the retried task must be enqueued again, not left to the rescuer.
func TestAWithdrawalAfterARacingRetryLeavesTheRetriedTaskAJob(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 0, RetryBase: time.Second, MaxRuntime: time.Hour})
	ctx := context.Background()
	enq := f.enqueuer()
	sub := NewSubmitter(f.st, enq, map[string]SubmitPolicy{"test:work": {Queue: "work", MaxRetry: 0, TimeoutSeconds: 600}},
		nil, nil, slog.New(slog.DiscardHandler), nil)
	task := f.task()
	if err := enq.Enqueue(ctx, task); err != nil {
		t.Fatal(err)
	}
	cancelled, err := f.st.Cancel(ctx, task.TaskNo, store.Scope{Owner: "alice"})
	if err != nil || !cancelled.Immediate {
		t.Fatalf("cancel: %+v %v", cancelled, err)
	}
	retried, err := f.st.Retry(ctx, task.TaskNo, store.Scope{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	sub.Enqueue(ctx, retried) // finds the cancelled task's job waiting under the same id: kept
	if err := sub.Withdraw(ctx, cancelled.Task, cancelled.PrevAttempt); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, lane := range Lanes("work") {
		if _, err := f.insp.GetTaskInfo(lane, JobID(task.TaskNo, retried.Attempt)); err == nil {
			found = true
		}
	}
	if got := f.get(task.ID); !found || got.Status != store.StatusPending {
		t.Fatalf("the retried task is %s with a job: %v; want PENDING with a job", got.Status, found)
	}
}
