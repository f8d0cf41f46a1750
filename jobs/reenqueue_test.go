package jobs

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// Tasks whose enqueue at submit failed because Redis was away are handed to asynq by the
// Reenqueuer once Redis answers again, each exactly once: one whose job did reach Redis
// before the connection broke is not enqueued a second time, one cancelled meanwhile is not
// enqueued at all, and the cleanup round no longer takes the others for orphans.
func TestReenqueuerHandsOverWhatASubmitCouldNotOnceRedisAnswers(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 0, RetryBase: time.Second, MaxRuntime: time.Hour})
	ctx := context.Background()
	rd := testenv.Redis{Addr: f.rdb.Options().Addr, DB: f.rdb.Options().DB}
	proxy := testenv.NewProxy(t, rd.Addr)
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: rd.DB, MaxRetries: -1})
	t.Cleanup(func() { viaProxy.Close() })
	enq := NewEnqueuer(asynq.NewClientFromRedisClient(viaProxy), asynq.NewInspectorFromRedisClient(viaProxy), nil)
	logger := slog.New(slog.DiscardHandler)
	retry := NewReenqueuer(f.st, enq, time.Hour, logger) // rounds are run by hand below
	sub := NewSubmitter(f.st, enq, nil, nil, nil, logger, nil).WithReenqueuer(retry)

	plain, other, cancelled, reached := f.task(), f.task(), f.task(), f.task()
	// reached: its job got to Redis, the answer did not (the connection broke on the way back).
	if err := f.enqueuer().Enqueue(ctx, reached); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	for _, task := range []*store.Task{plain, other, cancelled, reached} {
		sub.Enqueue(ctx, task)
	}
	if n := retry.Pending(); n != 4 {
		t.Fatalf("%d tasks held after four failed enqueues, want 4", n)
	}
	if n := retry.Round(ctx); n != 0 || retry.Pending() != 4 {
		t.Fatalf("a round while Redis is away handed over %d and holds %d, want 0 and 4", n, retry.Pending())
	}
	if _, err := f.st.Cancel(ctx, cancelled.TaskNo, store.Scope{Admin: true}); err != nil {
		t.Fatal(err)
	}

	proxy.Restore()
	if n := retry.Round(ctx); n != 2 {
		t.Fatalf("the first round after Redis came back created %d jobs, want 2 (the cancelled task none, the one already there none)", n)
	}
	if n := retry.Pending(); n != 0 {
		t.Fatalf("%d tasks still held after Redis came back", n)
	}
	jobs, err := f.insp.ListPendingTasks("work")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	want := []string{JobID(plain.TaskNo, 0), JobID(other.TaskNo, 0), JobID(reached.TaskNo, 0)}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("asynq holds %v, want one job each for the three waiting tasks %v", ids, want)
	}
	// Handed over: the cleanup round does not take them for orphans.
	orphans, err := f.st.TakeOrphans(ctx, time.Hour, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 0 {
		t.Fatalf("the cleanup round would take %d of them for orphans", len(orphans))
	}
	if n := retry.Round(ctx); n != 0 {
		t.Fatalf("a later round created %d more jobs", n)
	}
}

// A task the runtime sets to wait for a retry while Redis is away is held the same way and
// handed over, at its new attempt, once Redis answers.
func TestReenqueuerHandsOverARetryTheRuntimeCouldNotEnqueue(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Millisecond, MaxRuntime: time.Hour})
	ctx := context.Background()
	proxy := testenv.NewProxy(t, f.rdb.Options().Addr)
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: f.rdb.Options().DB, MaxRetries: -1})
	t.Cleanup(func() { viaProxy.Close() })
	enq := NewEnqueuer(asynq.NewClientFromRedisClient(viaProxy), asynq.NewInspectorFromRedisClient(viaProxy), nil)
	logger := slog.New(slog.DiscardHandler)
	retry := NewReenqueuer(f.st, enq, time.Hour, logger) // rounds are run by hand below
	rt := NewRuntime(RuntimeConfig{WorkerID: "w1", HeartbeatInterval: 50 * time.Millisecond, TakeoverAfter: 300 * time.Millisecond,
		ProgressInterval: 10 * time.Millisecond, Types: map[string]TypePolicy{"test:work": f.policy}},
		RuntimeDeps{Store: f.st, Enqueuer: enq, Files: f.files, Alerter: f.alerter, Logger: logger, Reenqueuer: retry})
	rt.Register(handlerFunc(func(context.Context, *Run) (Result, error) { return Result{}, errors.New("a passing fault") }))
	t.Cleanup(rt.Close)

	task := f.task()
	proxy.Cut()
	deliver(rt, task) //nolint:errcheck // the attempt's own outcome is read from the row
	row := f.get(task.ID)
	if row.Status != store.StatusRetryWait || row.Attempt != 1 {
		t.Fatalf("after a transient fault the task is %s at attempt %d, want RETRY_WAIT at 1", row.Status, row.Attempt)
	}
	if n := retry.Pending(); n != 1 {
		t.Fatalf("%d tasks held after the retry's enqueue failed, want 1", n)
	}
	proxy.Restore()
	if n := retry.Round(ctx); n != 1 {
		t.Fatalf("the round after Redis came back created %d jobs, want 1", n)
	}
	if _, err := f.insp.GetTaskInfo(Lane(row), JobID(task.TaskNo, 1)); err != nil {
		t.Fatalf("the retry's job is not in asynq: %v", err)
	}
}
