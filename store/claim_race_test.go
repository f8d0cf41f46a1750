package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

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
