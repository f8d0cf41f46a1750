package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

func TestAsynqLoggerHoldsBackRepeats(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := AsynqLogger(slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	for range 50 {
		l.Error("Failed to forward scheduled tasks: connection refused")
	}
	l.Error("another problem")
	l.Info("shutting down")
	l.Info("shutting down")
	out := buf.String()
	if n := strings.Count(out, "Failed to forward"); n != 1 {
		t.Fatalf("a repeated error was logged %d times in the window, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "another problem") || strings.Count(out, "shutting down") != 2 {
		t.Fatalf("distinct errors and info lines must all pass:\n%s", out)
	}
	// Past the window the message gets through again, with how many copies were held back.
	r := l.(asynqLogger).seen
	r.mu.Lock()
	for k, v := range r.last {
		v.at = v.at.Add(-repeatWindow - time.Second)
		r.last[k] = v
	}
	r.mu.Unlock()
	buf.Reset()
	l.Error("Failed to forward scheduled tasks: connection refused")
	if !strings.Contains(buf.String(), `"repeated":49`) {
		t.Fatalf("after the window: %s", buf.String())
	}
}

// After Redis loses its data the jobs are rebuilt from Postgres, but asynq lists a queue only
// on a client's first enqueue to it: a worker process writes its lanes back into the list, so
// the console and the queue metrics see them again without a restart.
func TestWorkersKeepTheirQueuesListedAfterRedisLosesThem(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 1, RetryBase: time.Second, MaxRuntime: time.Hour})
	rt := f.runtime(handlerFunc(func(context.Context, *Run) (Result, error) { return Result{}, nil }), "w1")
	w := NewWorkers(f.rdb, map[string]QueueConfig{"work": {Concurrency: 1}}, time.Second, 50*time.Millisecond,
		slog.New(slog.DiscardHandler), nil)
	w.listEvery = 50 * time.Millisecond
	if err := w.Start(rt, nil); err != nil {
		t.Fatal(err)
	}
	defer w.Shutdown()
	enq := f.enqueuer()
	listed := func() bool {
		qs, err := f.insp.Queues()
		return err == nil && len(qs) == len(Lanes("work")) && slices.Equal(slices.Sorted(slices.Values(qs)), slices.Sorted(slices.Values(Lanes("work"))))
	}
	testenv.Eventually(t, 5*time.Second, "the lanes to be listed", listed)
	if err := f.rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// The same long-lived client enqueues again (as the rescuer does): asynq itself would not
	// list the queue again.
	if err := enq.Enqueue(context.Background(), f.task()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the lanes to be listed again after the flush", listed)
	if _, err := f.insp.GetQueueInfo("work"); err != nil {
		t.Fatalf("queue info after the flush: %v", err)
	}
}
