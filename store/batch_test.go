package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/taskcenter/taskcenter/store"
)

// A batch of claims follows the single claim's rules row by row: waiting tasks are claimed,
// a live running one is refused with its takeover window, a missing one is not found.
func TestClaimTasksAnswersEachTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.Task(), f.Task()
	busy, _ := f.inStatus(store.StatusRunning)
	res, err := f.S.ClaimTasks(ctx, []int64{a.ID, b.ID, busy.ID, 999999}, "w9", takeover)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{a.ID, b.ID} {
		if r := res[id]; r.Err != nil || r.Claimed.Lease.Attempt != 1 || r.Claimed.Trigger != "first" {
			t.Fatalf("task %d: %+v", id, r)
		}
	}
	var nc *store.NotClaimableError
	if !errors.As(res[busy.ID].Err, &nc) || nc.Status != store.StatusRunning || nc.RetryIn <= 0 {
		t.Fatalf("live task: %+v", res[busy.ID])
	}
	if !errors.Is(res[999999].Err, store.ErrNotFound) {
		t.Fatalf("missing task: %+v", res[999999])
	}
	if n := f.Count("SELECT count(*) FROM task_runs WHERE worker = 'w9'"); n != 2 {
		t.Fatalf("%d run rows for the batch", n)
	}
}

// A fenced row inside a batch of endings fails only that caller: the others commit.
func TestEndAttemptsFencesRowByRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	live1, l1 := f.inStatus(store.StatusRunning)
	live2, l2 := f.inStatus(store.StatusRunning)
	taken, zombie, _ := f.takenOver() // the zombie's lease is superseded
	ok := store.Outcome{Status: store.StatusSuccess, Result: []byte(`{"rows":1}`)}
	ended, err := f.S.EndAttempts(ctx, []store.Ending{store.FinishedEnding(l1, ok), store.FinishedEnding(zombie, ok), store.FinishedEnding(l2, ok)})
	if err != nil {
		t.Fatal(err)
	}
	if ended[live1.ID] == nil || ended[live2.ID] == nil {
		t.Fatalf("live rows did not end: %v", ended)
	}
	if row, ok := ended[taken.ID]; ok && row.Attempt == zombie.Attempt {
		t.Fatal("the zombie's ending took effect")
	}
	if got := f.Get(taken.ID); got.Status != store.StatusRunning || got.Attempt != zombie.Attempt+1 {
		t.Fatalf("taken-over task = %s attempt %d", got.Status, got.Attempt)
	}
	for _, id := range []int64{live1.ID, live2.ID} {
		if got := f.Get(id); got.Status != store.StatusSuccess || got.FinishedAt == nil {
			t.Fatalf("task %d = %s", id, got.Status)
		}
	}
}

// One heartbeat statement for many attempts: live ones are kept alive and hear of a cancel;
// a superseded one is missing from the answer (fenced).
func TestHeartbeatManyFencesRowByRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	live, l1 := f.inStatus(store.StatusRunning)
	cancelled, l2 := f.inStatus(store.StatusRunning)
	taken, zombie, _ := f.takenOver()
	f.cancel(cancelled)
	alive, err := f.S.HeartbeatMany(ctx, []store.Lease{l1, l2, zombie})
	if err != nil {
		t.Fatal(err)
	}
	if req, ok := alive[live.ID]; !ok || req {
		t.Fatalf("live attempt: %v %v", req, ok)
	}
	if req, ok := alive[cancelled.ID]; !ok || !req {
		t.Fatal("the cancelled attempt did not hear of its cancel")
	}
	if _, ok := alive[taken.ID]; ok {
		t.Fatal("the superseded attempt was kept alive")
	}
}
