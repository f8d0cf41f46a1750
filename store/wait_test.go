package store_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

// waiting creates a PENDING task of queue at priority.
func (f *fixture) waiting(queue string, priority int) *store.Task {
	f.T.Helper()
	task, created, err := f.S.Create(context.Background(), store.NewTask{
		TaskNo: "tsk_" + rand.Text(), Type: "import:customers", Owner: "alice", Queue: queue, Priority: priority,
		Params: json.RawMessage(`{}`), MaxRetry: 3, TimeoutSeconds: 60,
	})
	if err != nil || !created {
		f.T.Fatalf("create: created=%v err=%v", created, err)
	}
	return task
}

func TestLinesCountTheTasksAWorkerWouldClaimFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	oldNormal := f.waiting("imports", 5)
	low := f.waiting("imports", 8)
	newNormal := f.waiting("imports", 5)
	high := f.waiting("imports", 2)
	f.waiting("exports", 1) // another queue's line is its own
	// A resumed task (attempt > 0, RETRY_WAIT and due) goes before every new one.
	resumed := f.waiting("imports", 9)
	f.Exec(`UPDATE tasks SET status = 'RETRY_WAIT', attempt = 1, next_retry_at = now() - interval '1 second' WHERE id = ?`, resumed.ID)
	// A RETRY_WAIT task not yet due is not claimable, so nobody waits behind it.
	notDue := f.waiting("imports", 1)
	f.Exec(`UPDATE tasks SET status = 'RETRY_WAIT', attempt = 1, next_retry_at = now() + interval '1 hour' WHERE id = ?`, notDue.ID)
	// Two tasks of the queue that started finished within the window, one before it; a task
	// cancelled before it started used no worker.
	done := []*store.Task{f.waiting("imports", 5), f.waiting("imports", 5), f.waiting("imports", 5), f.waiting("imports", 5)}
	for _, d := range done[:2] {
		f.Exec(`UPDATE tasks SET status = 'SUCCESS', started_at = now() - interval '2 minutes', finished_at = now() - interval '1 minute' WHERE id = ?`, d.ID)
	}
	f.Exec(`UPDATE tasks SET status = 'SUCCESS', started_at = now() - interval '2 hours', finished_at = now() - interval '1 hour' WHERE id = ?`, done[2].ID)
	f.Exec(`UPDATE tasks SET status = 'CANCELLED', finished_at = now() WHERE id = ?`, done[3].ID)

	ids := []int64{oldNormal.ID, low.ID, newNormal.ID, high.ID, resumed.ID, notDue.ID}
	lines, err := f.S.Lines(ctx, append(ids, done[0].ID), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int64{
		resumed.ID:   0,
		high.ID:      1, // behind the resumed task
		oldNormal.ID: 2,
		newNormal.ID: 3, // same lane, created later
		low.ID:       4,
		notDue.ID:    1, // resume lane, behind the resumed task created before it
	}
	for id, ahead := range want {
		l, ok := lines[id]
		if !ok {
			t.Fatalf("task %d: no line", id)
		}
		if l.Ahead != ahead || l.Finished != 2 {
			t.Errorf("task %d: ahead %d finished %d, want ahead %d finished 2", id, l.Ahead, l.Finished, ahead)
		}
	}
	if _, ok := lines[done[0].ID]; ok {
		t.Error("a finished task has a place in the line")
	}
	if lines, err := f.S.Lines(ctx, nil, time.Minute); err != nil || len(lines) != 0 {
		t.Errorf("no ids: %v %v", lines, err)
	}
}
