package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/audit"
	"github.com/taskcenter/taskcenter/store/pg"
)

// This file holds a user's actions on a task (the API's and the console's): cancel, retry,
// and bringing a scheduled retry forward. A worker's ending of its attempt is in tasks_end.go.

// CancelResult says what a cancel did.
type CancelResult struct {
	Task *Task
	// Immediate: the task was waiting and is now CANCELLED. Otherwise it is RUNNING with
	// cancel requested, and its worker stops at the next batch boundary.
	Immediate bool
	// PrevAttempt is the attempt the waiting task was queued under (its asynq job id).
	PrevAttempt int
}

// Cancel is the cancel API: PENDING or RETRY_WAIT → CANCELLED at once; RUNNING → cancel
// requested. who is recorded in the task log. A terminal task answers *ConflictError.
func (s *Tasks) Cancel(ctx context.Context, taskNo string, scope Scope) (*CancelResult, error) {
	return s.CancelBy(ctx, taskNo, scope, scope.Owner)
}

// CancelBy is Cancel with the actor named separately from the scope (the console acts with
// admin scope on behalf of an operator).
func (s *Tasks) CancelBy(ctx context.Context, taskNo string, scope Scope, who string) (*CancelResult, error) {
	var row struct {
		Task
		PrevStatus Status `bun:"prev_status"`
	}
	err := pg.One(ctx, s.db, s.db.DB, &row, `
		WITH old AS (
			SELECT id, status FROM tasks WHERE task_no = $1 AND ($2 OR owner = $3) FOR UPDATE
		), t AS (
			UPDATE tasks t
			SET status = CASE WHEN old.status = 'RUNNING' THEN 'RUNNING' ELSE 'CANCELLED' END,
			    cancel_requested = true, next_retry_at = NULL,
			    finished_at = CASE WHEN old.status = 'RUNNING' THEN NULL ELSE now() END, updated_at = now()
			FROM old WHERE t.id = old.id AND old.status IN ('PENDING', 'RETRY_WAIT', 'RUNNING')
			RETURNING t.*, old.status AS prev_status
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message, code, params)
			SELECT id, attempt, 'info', CASE WHEN prev_status = 'RUNNING' THEN 'cancel requested by ' ELSE 'cancelled by ' END || $4,
			       CASE WHEN prev_status = 'RUNNING' THEN 'log.cancel_requested_by' ELSE 'log.cancelled_by' END,
			       jsonb_build_object('who', $4::text)
			FROM t
		), ev AS (
			`+insertEvents(eventName, `$4`, `t`)+`
		), au AS (
			INSERT INTO audit_events (actor, via, action, target, outcome, detail, client_addr, request_id)
			SELECT $5::text, $6::text, 'task.cancel', task_no, 'success',
			       CASE WHEN prev_status = 'RUNNING' THEN 'cancel requested' ELSE 'cancelled' END, $7::text, $8::text
			FROM t WHERE $5::text <> ''
		)
		SELECT `+taskColumns+`, prev_status FROM t`, append([]any{taskNo, scope.Admin, scope.Owner, who}, audit.Params(ctx)...)...)
	if err == nil {
		audit.Written(ctx, 1)
		return &CancelResult{Task: &row.Task, Immediate: row.PrevStatus != StatusRunning, PrevAttempt: row.Attempt}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("cancel task %s: %w", taskNo, err)
	}
	return nil, s.refusal(ctx, taskNo, scope, "cancel")
}

// Retry is the retry API: FAILED, TIMEOUT or CANCELLED → PENDING as a new attempt
// generation. The attempt counter is kept (earlier runs stay on record), the automatic
// retry budget starts again, and the checkpoint is kept so an import resumes.
func (s *Tasks) Retry(ctx context.Context, taskNo string, scope Scope) (*Task, error) {
	for try := 0; ; try++ {
		task, err := s.retry(ctx, taskNo, scope)
		if !errors.Is(err, sql.ErrNoRows) {
			return task, err
		}
		err = s.refusal(ctx, taskNo, scope, "retry")
		var conflict *ConflictError
		if try == 0 && errors.As(err, &conflict) && conflict.Status.Retryable() && conflict.Reason == "" {
			// The task ended (a cancel honoured, an attempt failed) between the statement's
			// snapshot and now: it can be retried after all.
			continue
		}
		return nil, err
	}
}

// retry is one try of Retry; sql.ErrNoRows when the task was not in a retryable status.
func (s *Tasks) retry(ctx context.Context, taskNo string, scope Scope) (*Task, error) {
	row := new(Task)
	err := pg.One(ctx, s.db, s.db.DB, row, `
		WITH t AS (
			UPDATE tasks SET status = 'PENDING', retry_count = 0, next_retry_at = NULL, cancel_requested = false,
			       error_code = NULL, error_message = NULL, error_params = NULL, finished_at = NULL, enqueued_at = now(), updated_at = now(),
			       alert_due_at = NULL, alerted_at = NULL
			WHERE task_no = $1 AND ($2 OR owner = $3) AND status IN ('FAILED', 'TIMEOUT', 'CANCELLED')
			  AND error_code IS DISTINCT FROM $8
			RETURNING *
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message, code, params)
			SELECT id, attempt, 'info', 'retry requested by ' || $3, 'log.retry_requested_by', jsonb_build_object('who', $3::text) FROM t
		), ev AS (
			`+insertEvents(`'`+task.EventRetried+`'`, `$3`, `t`)+`
		), au AS (
			INSERT INTO audit_events (actor, via, action, target, outcome, client_addr, request_id)
			SELECT $4::text, $5::text, 'task.retry', task_no, 'success', $6::text, $7::text FROM t WHERE $4::text <> ''
		)
		SELECT `+taskColumns+` FROM t`, append(append([]any{taskNo, scope.Admin, scope.Owner}, audit.Params(ctx)...), task.CodeAllRowsRejected)...)
	if err == nil {
		audit.Written(ctx, 1)
		return row, nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	return nil, fmt.Errorf("retry task %s: %w", taskNo, err)
}

// ExpediteRetry makes a RETRY_WAIT task due now instead of at its back-off time (the
// console's "run now" on a scheduled retry). who is recorded in the task log. A task in any
// other status answers *ConflictError.
func (s *Tasks) ExpediteRetry(ctx context.Context, taskNo string, who string) (*Task, error) {
	task := new(Task)
	err := pg.One(ctx, s.db, s.db.DB, task, `
		WITH t AS (
			UPDATE tasks SET next_retry_at = now(), updated_at = now()
			WHERE task_no = $1 AND status = 'RETRY_WAIT'
			RETURNING *
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message, code, params)
			SELECT id, attempt, 'info', 'retry brought forward by ' || $2, 'log.retry_expedited_by', jsonb_build_object('who', $2::text) FROM t
		)
		SELECT `+taskColumns+` FROM t`, taskNo, who)
	if err == nil {
		return task, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("expedite retry of task %s: %w", taskNo, err)
	}
	return nil, s.refusal(ctx, taskNo, Scope{Admin: true}, "run now")
}

// refusal explains a refused API transition: not found, or a conflict with the status.
func (s *Tasks) refusal(ctx context.Context, taskNo string, scope Scope, op string) error {
	t, err := s.Get(ctx, taskNo, scope)
	if err != nil {
		return err
	}
	if op == "retry" && t.Status.Retryable() && !task.CanRetry(t.Status, t.ErrorCode) {
		return &ConflictError{Op: op, Status: t.Status,
			Reason: "every row of this import was rejected, so a retry would reject them again: fix the rows the error report lists and upload the file anew"}
	}
	return &ConflictError{Op: op, Status: t.Status}
}
