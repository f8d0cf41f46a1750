package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/task"

	"github.com/taskcenter/taskcenter/store/pg"
)

// This file holds a worker's claim of a task: PENDING or due RETRY_WAIT → RUNNING, and the
// takeover of a RUNNING task whose worker went silent.

// ClaimOutcome says why a claim did not happen and when trying again makes sense.
type ClaimOutcome struct {
	// Status is the task's status when the claim was refused.
	Status Status
	// Attempt is the task's attempt number when the claim was refused.
	Attempt int
	// RetryIn is set when the task may become claimable: a live RUNNING task's takeover
	// window, or a RETRY_WAIT task's remaining back-off.
	RetryIn time.Duration
	// OwnerAtCap: the task waits because its owner has the queue's maximum of running tasks.
	OwnerAtCap bool
}

// NotClaimableError is returned when a task cannot be claimed now.
type NotClaimableError struct{ ClaimOutcome }

func (e *NotClaimableError) Error() string {
	if e.OwnerAtCap {
		return "the task's owner has the queue's maximum of running tasks; it waits for one to finish"
	}
	if e.RetryIn > 0 {
		return fmt.Sprintf("task is %s; claimable in %s", e.Status, e.RetryIn.Round(time.Millisecond))
	}
	return fmt.Sprintf("task is %s; nothing to run", e.Status)
}

// Claimed is a successful claim: the task as it is now, and how this attempt came about.
type Claimed struct {
	Task    *Task
	Trigger string // first | retry | resume | takeover | manual_retry
	Lease   Lease
}

// ClaimEndedError is returned when a claim found a RUNNING task whose worker is gone and
// ended the task instead of taking it over: its cancel had been requested (CANCELLED), or
// the takeovers had used up its retries (FAILED, with an alert due). Task is the row as the
// claim left it.
type ClaimEndedError struct{ Task *Task }

func (e *ClaimEndedError) Error() string {
	return fmt.Sprintf("the task's worker is gone and the task ended %s instead of being taken over", e.Task.Status)
}

// ClaimTask gives worker the task: PENDING or due RETRY_WAIT → RUNNING, or RUNNING whose
// heartbeat is older than takeoverAfter → RUNNING (takeover, which spends one retry). The
// attempt number goes up by one; it is the lease every later write of this execution must
// carry. Exactly one of any number of concurrent claimers wins; the others get
// *NotClaimableError.
//
// A takeover never runs a task the rules say is over: when its cancel was requested the task
// ends CANCELLED, and when its retries are used up (a task that keeps killing its workers)
// it ends FAILED with an alert due; both answer *ClaimEndedError. So retry_count never
// exceeds max_retry.
func (s *Attempts) ClaimTask(ctx context.Context, taskID int64, worker string, takeoverAfter time.Duration) (*Claimed, error) {
	return s.claimTask(ctx, s.db.DB, taskID, worker, takeoverAfter)
}

// ClaimTaskCapped is ClaimTask under a fair-share cap: when the task's owner already has
// maxRunning RUNNING tasks in the task's queue, a waiting task is not claimed and the
// answer is *NotClaimableError with OwnerAtCap set (the task waits; no retry is spent). The
// count and the claim run under a per-(queue, owner) advisory lock, so concurrent claimers
// cannot overshoot the cap. maxRunning <= 0 is ClaimTask.
func (s *Attempts) ClaimTaskCapped(ctx context.Context, taskID int64, worker string, takeoverAfter time.Duration, maxRunning int) (*Claimed, error) {
	if maxRunning <= 0 {
		return s.ClaimTask(ctx, taskID, worker, takeoverAfter)
	}
	var (
		claimed *Claimed
		refused error // a refusal or an ending the claim itself decided: the transaction commits
	)
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var who struct {
			Queue   string `bun:"queue"`
			Owner   string `bun:"owner"`
			Status  Status `bun:"status"`
			Attempt int    `bun:"attempt"`
		}
		err := pg.One(ctx, s.db, tx.Tx, &who, `SELECT queue, owner, status, attempt FROM tasks WHERE id = $1`, taskID)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if who.Status.Waiting() {
			if _, err := pg.Exec(ctx, tx.Tx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 0))`, who.Queue, who.Owner); err != nil {
				return err
			}
			var running int
			err := pg.One(ctx, s.db, tx.Tx, &running, `
				SELECT count(*) FROM (SELECT 1 FROM tasks WHERE queue = $1 AND owner = $2 AND status = 'RUNNING' LIMIT $3) r`,
				who.Queue, who.Owner, maxRunning)
			if err != nil {
				return err
			}
			if running >= maxRunning {
				refused = &NotClaimableError{ClaimOutcome{Status: who.Status, Attempt: who.Attempt, RetryIn: time.Second, OwnerAtCap: true}}
				return nil
			}
		}
		claimed, err = s.claimTask(ctx, tx.Tx, taskID, worker, takeoverAfter)
		var (
			ended *ClaimEndedError
			nc    *NotClaimableError
		)
		if errors.As(err, &ended) || errors.As(err, &nc) {
			refused = err
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return claimed, refused
}

func (s *Attempts) claimTask(ctx context.Context, q pg.Querier, taskID int64, worker string, takeoverAfter time.Duration) (*Claimed, error) {
	res, err := s.claimTasks(ctx, q, []int64{taskID}, worker, takeoverAfter)
	if err != nil {
		return nil, err
	}
	r := res[taskID]
	return r.Claimed, r.Err
}

// ClaimResult is one task's answer from ClaimTasks: a claim, or why not (*NotClaimableError,
// *ClaimEndedError, ErrNotFound).
type ClaimResult struct {
	Claimed *Claimed
	Err     error
}

// ClaimTasks claims many tasks for worker in one statement (one transaction, one fsync): the
// claim batcher's flush. Each task follows ClaimTask's rules on its own; ids must be distinct.
func (s *Attempts) ClaimTasks(ctx context.Context, ids []int64, worker string, takeoverAfter time.Duration) (map[int64]ClaimResult, error) {
	return s.claimTasks(ctx, s.db.DB, ids, worker, takeoverAfter)
}

// sqlClaim claims the tasks $1 for worker $2, taking over heartbeats older than $3 seconds.
var sqlClaim = `
		WITH old AS (
			SELECT id, status, attempt, retry_count, max_retry, cancel_requested, heartbeat_at, next_retry_at
			FROM tasks WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE
		), decision AS (
			SELECT id, CASE
			    WHEN status IN ('PENDING', 'RETRY_WAIT') AND (next_retry_at IS NULL OR next_retry_at <= now()) THEN 'claim'
			    WHEN status = 'RUNNING' AND heartbeat_at < now() - make_interval(secs => $3) THEN
			        CASE WHEN cancel_requested THEN 'cancel' WHEN retry_count >= max_retry THEN 'give_up' ELSE 'takeover' END
			    END AS d
			FROM old
		), claimed AS (
			UPDATE tasks t
			SET status = 'RUNNING', attempt = t.attempt + 1, heartbeat_at = now(), worker = $2,
			    -- a takeover spends a retry: a task that keeps killing its workers must end
			    retry_count = t.retry_count + CASE WHEN old.status = 'RUNNING' THEN 1 ELSE 0 END,
			    started_at = COALESCE(t.started_at, now()), next_retry_at = NULL, updated_at = now()
			FROM old, decision
			WHERE t.id = old.id AND decision.id = old.id AND decision.d IN ('claim', 'takeover')
			RETURNING t.*, old.status AS prev_status, CASE
			    WHEN old.status = 'RUNNING' THEN 'takeover'
			    WHEN old.status = 'RETRY_WAIT' AND t.error_code = 'interrupted' THEN 'resume'
			    WHEN old.status = 'RETRY_WAIT' THEN 'retry'
			    WHEN t.attempt = 1 THEN 'first' ELSE 'manual_retry' END AS trigger
		), ended AS (
			UPDATE tasks t
			SET status = CASE WHEN decision.d = 'cancel' THEN 'CANCELLED' ELSE 'FAILED' END,
			    error_code = CASE WHEN decision.d = 'cancel' THEN NULL ELSE '` + task.CodeRetriesExhausted + `' END,
			    error_message = CASE WHEN decision.d = 'cancel' THEN NULL
			        ELSE 'the worker running this task stopped responding ' || (t.retry_count + 1) || ' times; giving up' END,
			    error_params = CASE WHEN decision.d = 'cancel' THEN NULL ELSE jsonb_build_object('times', (t.retry_count + 1)::text) END,
			    alert_due_at = CASE WHEN decision.d = 'give_up' THEN now() ELSE t.alert_due_at END,
			    finished_at = now(), next_retry_at = NULL, updated_at = now()
			FROM decision
			WHERE t.id = decision.id AND decision.d IN ('cancel', 'give_up')
			RETURNING t.*, 'RUNNING'::text AS prev_status, 'ended'::text AS trigger
		), superseded AS (
			UPDATE task_runs r SET status = CASE WHEN e.id IS NULL THEN 'SUPERSEDED' ELSE e.status END, finished_at = now(),
			       error = 'no heartbeat for ' || $3::float8 || 's; ' || CASE WHEN e.id IS NULL THEN 'taken over by ' || $2
			               WHEN e.status = 'CANCELLED' THEN 'cancelled as requested' ELSE 'retries used up' END,
			       error_code = CASE WHEN e.id IS NULL THEN 'superseded' WHEN e.status = 'CANCELLED' THEN NULL ELSE 'retries_exhausted' END
			FROM (SELECT id, attempt - 1 AS attempt FROM claimed WHERE prev_status = 'RUNNING'
			      UNION ALL SELECT id, attempt FROM ended) dead
			LEFT JOIN ended e ON e.id = dead.id
			WHERE r.task_id = dead.id AND r.attempt = dead.attempt AND r.finished_at IS NULL
		), run AS (
			INSERT INTO task_runs (task_id, attempt, trigger, worker, status)
			SELECT id, attempt, trigger, worker, 'RUNNING' FROM claimed
		), lg AS (
			-- The run row records every attempt; the narrative only notes the unusual ones.
			INSERT INTO task_logs (task_id, attempt, level, message, code, params)
			SELECT id, attempt, CASE WHEN prev_status = 'RUNNING' THEN 'warn' ELSE 'info' END,
			       'attempt ' || attempt || ' started on ' || worker || ' (' || trigger || ')', 'log.attempt_started',
			       jsonb_build_object('attempt', attempt::text, 'worker', worker, 'trigger', trigger)
			FROM claimed WHERE attempt > 1
			UNION ALL
			SELECT id, attempt, CASE WHEN status = 'CANCELLED' THEN 'info' ELSE 'error' END,
			       CASE WHEN status = 'CANCELLED' THEN 'cancelled as requested; its worker had stopped responding'
			            ELSE 'failed: ' || error_message END,
			       CASE WHEN status = 'CANCELLED' THEN 'log.cancelled_unresponsive' ELSE 'log.failed' END,
			       CASE WHEN status = 'CANCELLED' THEN NULL
			            ELSE COALESCE(error_params, '{}') || jsonb_build_object('code', error_code, 'error', error_message) END
			FROM ended
		), ev AS (
			` + insertEvents(eventName, `$2`, `(SELECT * FROM claimed UNION ALL SELECT * FROM ended) c`) + `
		)
		SELECT ` + taskColumns + `, prev_status, trigger FROM claimed
		UNION ALL
		SELECT ` + taskColumns + `, prev_status, trigger FROM ended`

func (s *Attempts) claimTasks(ctx context.Context, q pg.Querier, ids []int64, worker string, takeoverAfter time.Duration) (map[int64]ClaimResult, error) {
	var rows []struct {
		Task
		PrevStatus Status `bun:"prev_status"` // the status the claim left
		Trigger    string `bun:"trigger"`     // how this attempt came about, or "ended"
	}
	// The rows are locked by a statement of their own before the claim: a statement that
	// waits for a row lock re-reads that row when it gets it, but its other parts keep the
	// snapshot of its start, so a claim that queued behind a concurrent claim would decide a
	// takeover on the new row yet miss the run row that claim inserted, leaving two attempts
	// open. After the lock, the claim's snapshot holds everything committed before it.
	claim := func(q pg.Querier) error {
		if _, err := pg.Exec(ctx, q, `SELECT id FROM tasks WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`, ids); err != nil {
			return err
		}
		return pg.All(ctx, s.db, q, &rows, sqlClaim, ids, worker, takeoverAfter.Seconds())
	}
	var err error
	if tx, ok := q.(*sql.Tx); ok {
		err = claim(tx)
	} else {
		err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return claim(tx.Tx) })
	}
	if err != nil {
		return nil, fmt.Errorf("claim tasks %v: %w", ids, err)
	}
	out := make(map[int64]ClaimResult, len(ids))
	for i := range rows {
		t := &rows[i].Task
		if rows[i].Trigger == "ended" {
			out[t.ID] = ClaimResult{Err: &ClaimEndedError{Task: t}}
			continue
		}
		out[t.ID] = ClaimResult{Claimed: &Claimed{Task: t, Trigger: rows[i].Trigger, Lease: Lease{TaskID: t.ID, TaskNo: t.TaskNo, Attempt: t.Attempt}}}
	}
	var missing []int64
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	// Not claimed: say why, and when it could be.
	var states []struct {
		ID          int64      `bun:"id"`
		Status      Status     `bun:"status"`
		Attempt     int        `bun:"attempt"`
		HeartbeatAt *time.Time `bun:"heartbeat_at"`
		NextRetryAt *time.Time `bun:"next_retry_at"`
		Now         time.Time  `bun:"now"`
	}
	if err := pg.All(ctx, s.db, q, &states, `SELECT id, status, attempt, heartbeat_at, next_retry_at, now() AS now FROM tasks WHERE id = ANY($1::bigint[])`,
		missing); err != nil {
		return nil, fmt.Errorf("claim tasks %v: %w", missing, err)
	}
	for _, st := range states {
		o := ClaimOutcome{Status: st.Status, Attempt: st.Attempt}
		switch {
		case st.Status == StatusRunning && st.HeartbeatAt != nil:
			o.RetryIn = max(st.HeartbeatAt.Add(takeoverAfter).Sub(st.Now), time.Second)
		case st.Status.Waiting() && st.NextRetryAt != nil:
			o.RetryIn = max(st.NextRetryAt.Sub(st.Now), time.Second)
		}
		out[st.ID] = ClaimResult{Err: &NotClaimableError{o}}
	}
	for _, id := range missing {
		if _, ok := out[id]; !ok {
			out[id] = ClaimResult{Err: ErrNotFound}
		}
	}
	return out, nil
}
