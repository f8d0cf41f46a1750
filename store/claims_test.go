package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
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

// A takeover claim that queues behind another claim of the same task still closes the run
// that claim opened: one open run per task, however the two interleave. (A claim statement
// that waited for the row lock inside itself decided on the new row but kept the snapshot of
// its start, in which the other claim's run row did not exist yet: two attempts stayed open.)
func TestATakeoverQueuedBehindAClaimClosesThatClaimsRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task := f.Task()

	// The first claim, held open: the row locked, RUNNING attempt 1, its run row written.
	first, err := f.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback() //nolint:errcheck
	for _, q := range []string{
		`SELECT id FROM tasks WHERE id = ? FOR UPDATE`,
		`UPDATE tasks SET status = 'RUNNING', attempt = 1, worker = 'w1', heartbeat_at = now(), started_at = now() WHERE id = ?`,
		`INSERT INTO task_runs (task_id, attempt, trigger, worker, status) VALUES (?, 1, 'first', 'w1', 'RUNNING')`,
	} {
		if _, err := first.ExecContext(ctx, q, task.ID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A second worker's claim, which sees the heartbeat as stale (takeover after 0 s), queues
	// behind the first.
	done := make(chan error, 1)
	go func() {
		_, err := f.S.ClaimTask(ctx, task.ID, "w2", 0)
		done <- err
	}()
	testenv.Eventually(t, 10*time.Second, "the second claim to wait for the row", func() bool {
		var waiting int
		err := f.DB.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting > 0
	})
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the takeover: %v", err)
	}
	var runs []struct {
		Attempt int    `bun:"attempt"`
		Status  string `bun:"status"`
		Open    bool   `bun:"open"`
	}
	if err := f.DB.NewRaw(`SELECT attempt, status, finished_at IS NULL AS open FROM task_runs WHERE task_id = ? ORDER BY attempt`,
		task.ID).Scan(ctx, &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Open || runs[0].Status != "SUPERSEDED" || !runs[1].Open || runs[1].Attempt != 2 {
		t.Fatalf("runs after the takeover: %+v, want attempt 1 SUPERSEDED and closed, attempt 2 open", runs)
	}
}

// waiting creates a PENDING task of queue at priority.
func (f *fixture) waiting(queue string, priority int) *store.Task {
	f.T.Helper()
	return f.Create(store.NewTask{Type: "import:customers", Owner: "alice", Queue: queue, Priority: priority,
		Params: json.RawMessage(`{}`), MaxRetry: 3, TimeoutSeconds: 60})
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
