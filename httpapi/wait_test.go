package httpapi

import (
	"testing"

	"github.com/taskcenter/taskcenter/store"
)

// A waiting task's view says where it stands in its queue, on the task and on the list, and
// when it should start once the queue has finished work lately; a task that is not waiting
// has no place.
func TestWaitingTasksShowTheirPlaceInTheQueue(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	first := e.imported("alice", "first.csv")
	second := e.imported("bob", "second.csv") // another owner's task is still in the same line
	third := e.imported("alice", "third.csv")
	e.finishedExport(nil)

	got := e.taskView(aliceToken, third.TaskNo)
	if got.Wait == nil || got.Wait.Position != 3 || got.Wait.Ahead != 2 || got.Wait.ExpectedStart != nil {
		t.Fatalf("third in line with no worker: %+v", got.Wait)
	}
	list := e.list(aliceToken, "")
	for _, v := range list.Items {
		switch v.ID {
		case first.TaskNo:
			if v.Wait == nil || v.Wait.Position != 1 {
				t.Errorf("first in the list: %+v", v.Wait)
			}
		case third.TaskNo:
			if v.Wait == nil || v.Wait.Position != 3 {
				t.Errorf("third in the list: %+v", v.Wait)
			}
		default:
			if v.Wait != nil {
				t.Errorf("%s %s has a place in line: %+v", v.ID, v.Status, v.Wait)
			}
		}
	}

	// Once the queue has finished work lately, the wait has an expected start; a priority-1
	// task goes ahead of the others.
	e.count(`WITH d AS (UPDATE tasks SET status = 'SUCCESS', started_at = now() - interval '1 minute', finished_at = now()
		WHERE id = ? RETURNING 1) SELECT count(*) FROM d`, second.ID)
	e.count(`WITH d AS (UPDATE tasks SET priority = 1 WHERE id = ? RETURNING 1) SELECT count(*) FROM d`, third.ID)
	got = e.taskView(aliceToken, third.TaskNo)
	if got.Wait == nil || got.Wait.Position != 1 || got.Wait.ExpectedStart == nil || !got.Wait.ExpectedStart.After(got.CreatedAt) {
		t.Fatalf("first in line of a queue that finished work: %+v", got.Wait)
	}
	if v := e.taskView(bobToken, second.TaskNo); v.Status != store.StatusSuccess || v.Wait != nil {
		t.Fatalf("a finished task: %s %+v", v.Status, v.Wait)
	}
}
