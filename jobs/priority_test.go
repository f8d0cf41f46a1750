package jobs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// Alice floods a queue with 1,200 submits; bob submits one. Alice's waiting cap refuses the
// flood beyond it (a BusyError naming her, so the API answers 429 owner_waiting_limit), bob's
// submit is accepted, and with alice at her running cap bob's task starts within one task
// duration of a worker slot freeing up, not after alice's backlog.
func TestFairShareKeepsOneUserFromStarvingOthers(t *testing.T) {
	t.Parallel()
	const taskTime = 150 * time.Millisecond
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour, MaxRunningPerOwner: 1})
	ctx := context.Background()
	sub := f.submitter(SubmitPolicy{Queue: "work", MaxRetry: 3, TimeoutSeconds: 600, Priority: PriorityDefault, MaxWaitingPerOwner: 100})

	accepted, refused := 0, 0
	for range 1200 {
		_, _, err := sub.Submit(ctx, Submission{Type: "test:work", Owner: "alice"})
		var busy *BusyError
		switch {
		case err == nil:
			accepted++
		case errors.As(err, &busy) && busy.Owner == "alice":
			refused++
		default:
			t.Fatal(err)
		}
	}
	if accepted != 100 || refused != 1100 {
		t.Fatalf("alice: %d accepted, %d refused; want 100 and 1100", accepted, refused)
	}

	var mu sync.Mutex
	started := map[string]time.Time{}
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		mu.Lock()
		started[run.Task.Owner+"/"+run.Task.TaskNo] = time.Now()
		mu.Unlock()
		time.Sleep(taskTime)
		return Result{}, nil
	}), "w1")
	defer f.workers(rt, 2).Shutdown()
	testenv.Eventually(t, 10*time.Second, "alice's tasks to be running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(started) >= 2
	})
	submitted := time.Now()
	bob, created, err := sub.Submit(ctx, Submission{Type: "test:work", Owner: "bob"})
	if err != nil || !created {
		t.Fatalf("bob's submit: %v", err)
	}
	var bobStarted time.Time
	testenv.Eventually(t, 20*time.Second, "bob's task to start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		bobStarted = started["bob/"+bob.TaskNo]
		return !bobStarted.IsZero()
	})
	// Alice never runs more than one at a time, so a slot is free for bob at once: bob does
	// not wait behind alice's backlog (without the cap he would start after all 100).
	mu.Lock()
	before := 0
	for k, at := range started {
		if k[:5] == "alice" && at.After(submitted) && at.Before(bobStarted) {
			before++
		}
	}
	mu.Unlock()
	// Alice's 100 tasks run one at a time (150 ms each); bob's starts while most of them are
	// still queued. Without the cap he would start after all of them.
	if before > 15 {
		t.Fatalf("%d of alice's tasks started between bob's submit and his start", before)
	}
	if n := f.count(ctx, "SELECT count(*) FROM tasks WHERE owner = 'alice' AND retry_count > 0"); n != 0 {
		t.Fatalf("deferring alice's tasks spent retries on %d of them", n)
	}
	if got, _ := f.st.GetByID(ctx, bob.ID); got.Status != store.StatusRunning && got.Status != store.StatusSuccess {
		t.Fatalf("bob's task is %s", got.Status)
	}
}

func (f *rtFixture) count(ctx context.Context, q string) int {
	var n int
	if err := f.pg.DB.QueryRowContext(ctx, q).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// With 200 low-priority tasks waiting, a high-priority one submitted last starts before the
// 10th low one.
func TestPriorityLanesOrderTheWork(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour})
	ctx := context.Background()
	sub := f.submitter(SubmitPolicy{Queue: "work", MaxRetry: 3, TimeoutSeconds: 600, Priority: PriorityDefault})
	for range 200 {
		if _, _, err := sub.Submit(ctx, Submission{Type: "test:work", Owner: "alice", Priority: 9}); err != nil {
			t.Fatal(err)
		}
	}
	high, _, err := sub.Submit(ctx, Submission{Type: "test:work", Owner: "bob", Priority: 1})
	if err != nil {
		t.Fatal(err)
	}
	if high.Priority != 1 || Lane(high) != "work.high" {
		t.Fatalf("high task: priority %d lane %s", high.Priority, Lane(high))
	}

	var started testenv.Collector[string]
	rt := f.runtime(handlerFunc(func(ctx context.Context, run *Run) (Result, error) {
		started.Add(run.Task.TaskNo)
		return Result{}, nil
	}), "w1")
	defer f.workers(rt, 1).Shutdown()
	testenv.Eventually(t, 30*time.Second, "ten tasks to start", func() bool { return started.Len() >= 10 })
	order := started.Since(0)
	pos := -1
	for i, no := range order {
		if no == high.TaskNo {
			pos = i
		}
	}
	if pos < 0 || pos >= 10 {
		t.Fatalf("the high-priority task started at position %d of %v", pos, order)
	}
}

// A client may ask for no priority (the type's default) or one from 1 to 9; anything else
// is refused with the range, in the catalogue's words.
func TestPriorityProblemNamesTheRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		priority int
		bad      bool
	}{{0, false}, {PriorityHighest, false}, {PriorityDefault, false}, {PriorityLowest, false}, {-1, true}, {PriorityLowest + 1, true}, {12, true}} {
		m, bad := PriorityProblem(tc.priority)
		if bad != tc.bad {
			t.Errorf("priority %d: bad %v, want %v", tc.priority, bad, tc.bad)
		}
		if want := "must be from 1 (runs first) to 9 (runs last)"; bad && m.English() != want {
			t.Errorf("priority %d: %q, want %q", tc.priority, m.English(), want)
		}
	}
}
