package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

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
