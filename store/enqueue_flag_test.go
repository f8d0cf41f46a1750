package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

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
