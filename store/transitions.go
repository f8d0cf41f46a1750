package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// This file holds every task state transition (DESIGN §3). Each one is a single conditional
// UPDATE: it names the statuses it may leave, and running attempts are fenced by their lease
// (`AND attempt = ?`), so a transition either happens exactly once or changes nothing.
// The attempt's task_runs row and a task_logs line are written in the same statement.

// Store reads and writes tasks.
type Store struct {
	db        *bun.DB
	rewritten sync.Map // query text → the same with $n placeholders (see prepared)
}

// New returns a Store over db.
func New(db *bun.DB) *Store { return &Store{db: db} }

// NewTask is what a submit knows about a task.
type NewTask struct {
	TaskNo         string
	Type           string
	Owner          string
	Queue          string
	Priority       int
	BizKey         string // empty: no idempotency key
	Params         json.RawMessage
	RequestID      string
	MaxRetry       int
	TimeoutSeconds int
}

// Create inserts a PENDING task: (new) → PENDING. When a task with the same owner, type and
// biz key exists, it returns that one and created=false instead.
func (s *Store) Create(ctx context.Context, nt NewTask) (task *Task, created bool, err error) {
	params := string(nt.Params)
	if params == "" {
		params = "{}"
	}
	var bizKey *string
	if nt.BizKey != "" {
		bizKey = &nt.BizKey
	}
	task = new(Task)
	err = s.prepared(ctx, task, `
		WITH t AS (
			INSERT INTO tasks (task_no, type, owner, queue, priority, biz_key, status, params, request_id,
			                   max_retry, timeout_seconds, enqueued_at)
			VALUES (?, ?, ?, ?, ?, ?, 'PENDING', ?::jsonb, NULLIF(?, ''), ?, ?, now())
			ON CONFLICT (owner, type, biz_key) WHERE biz_key IS NOT NULL DO NOTHING
			RETURNING *
		)
		SELECT * FROM t`,
		nt.TaskNo, nt.Type, nt.Owner, nt.Queue, nt.Priority, bizKey, params, nt.RequestID,
		nt.MaxRetry, nt.TimeoutSeconds)
	if err == nil {
		return task, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) || bizKey == nil {
		return nil, false, fmt.Errorf("create task: %w", err)
	}
	existing := new(Task)
	err = s.db.NewSelect().Model(existing).
		Where("owner = ? AND type = ? AND biz_key = ?", nt.Owner, nt.Type, nt.BizKey).Scan(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("find task with the same key: %w", err)
	}
	return existing, false, nil
}

// ClaimOutcome says why a claim did not happen and when trying again makes sense.
type ClaimOutcome struct {
	// Status is the task's status when the claim was refused.
	Status Status
	// RetryIn is set when the task may become claimable: a live RUNNING task's takeover
	// window, or a RETRY_WAIT task's remaining back-off.
	RetryIn time.Duration
}

// NotClaimableError is returned when a task cannot be claimed now.
type NotClaimableError struct{ ClaimOutcome }

func (e *NotClaimableError) Error() string {
	if e.RetryIn > 0 {
		return fmt.Sprintf("task is %s; claimable in %s", e.Status, e.RetryIn.Round(time.Millisecond))
	}
	return fmt.Sprintf("task is %s; nothing to run", e.Status)
}

// Claimed is a successful claim: the task as it is now, and how this attempt came about.
type Claimed struct {
	Task    *Task
	Trigger string // first | retry | resume | takeover
	Lease   Lease
}

// Claim gives worker the task: PENDING or due RETRY_WAIT → RUNNING, or RUNNING whose
// heartbeat is older than takeoverAfter → RUNNING (takeover, which spends one retry). The
// attempt number goes up by one; it is the lease every later write of this execution must
// carry. Exactly one of any number of concurrent claimers wins; the others get
// *NotClaimableError.
func (s *Store) Claim(ctx context.Context, taskID int64, worker string, takeoverAfter time.Duration) (*Claimed, error) {
	var row struct {
		Task
		PrevStatus Status `bun:"prev_status"` // the status the claim left
		Trigger    string `bun:"trigger"`     // how this attempt came about
	}
	err := s.prepared(ctx, &row, `
		WITH old AS (
			SELECT id, status, attempt, retry_count FROM tasks WHERE id = ?0 FOR UPDATE
		), claimed AS (
			UPDATE tasks t
			SET status = 'RUNNING', attempt = t.attempt + 1, heartbeat_at = now(), worker = ?1,
			    -- a takeover spends a retry: a task that keeps killing its workers must end
			    retry_count = t.retry_count + CASE WHEN old.status = 'RUNNING' THEN 1 ELSE 0 END,
			    started_at = COALESCE(t.started_at, now()), next_retry_at = NULL, updated_at = now()
			FROM old
			WHERE t.id = old.id AND (
			      (old.status IN ('PENDING', 'RETRY_WAIT') AND (t.next_retry_at IS NULL OR t.next_retry_at <= now()))
			   OR (old.status = 'RUNNING' AND t.heartbeat_at < now() - make_interval(secs => ?2)))
			RETURNING t.*, old.status AS prev_status, CASE
			    WHEN old.status = 'RUNNING' THEN 'takeover'
			    WHEN old.status = 'RETRY_WAIT' AND t.error_code = 'interrupted' THEN 'resume'
			    WHEN old.status = 'RETRY_WAIT' THEN 'retry'
			    WHEN t.attempt = 1 THEN 'first' ELSE 'manual_retry' END AS trigger
		), superseded AS (
			UPDATE task_runs r SET status = 'SUPERSEDED', finished_at = now(),
			       error = 'no heartbeat for ' || ?2 || 's; taken over by ' || ?1
			FROM claimed c
			WHERE c.prev_status = 'RUNNING' AND r.task_id = c.id AND r.attempt = c.attempt - 1 AND r.finished_at IS NULL
		), run AS (
			INSERT INTO task_runs (task_id, attempt, trigger, worker, status)
			SELECT id, attempt, trigger, worker, 'RUNNING' FROM claimed
		), lg AS (
			-- The run row records every attempt; the narrative only notes the unusual ones.
			INSERT INTO task_logs (task_id, attempt, level, message)
			SELECT id, attempt, CASE WHEN prev_status = 'RUNNING' THEN 'warn' ELSE 'info' END,
			       'attempt ' || attempt || ' started on ' || worker || ' (' || trigger || ')'
			FROM claimed WHERE attempt > 1
		)
		SELECT * FROM claimed`,
		taskID, worker, takeoverAfter.Seconds())
	switch {
	case err == nil:
		t := &row.Task
		return &Claimed{Task: t, Trigger: row.Trigger, Lease: Lease{TaskID: t.ID, TaskNo: t.TaskNo, Attempt: t.Attempt}}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("claim task %d: %w", taskID, err)
	}
	// Not claimed: say why, and when it could be.
	var st struct {
		Status      Status     `bun:"status"`
		HeartbeatAt *time.Time `bun:"heartbeat_at"`
		NextRetryAt *time.Time `bun:"next_retry_at"`
		Now         time.Time  `bun:"now"`
	}
	err = s.db.NewRaw(`SELECT status, heartbeat_at, next_retry_at, now() AS now FROM tasks WHERE id = ?`, taskID).Scan(ctx, &st)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("claim task %d: %w", taskID, err)
	}
	out := ClaimOutcome{Status: st.Status}
	switch {
	case st.Status == StatusRunning && st.HeartbeatAt != nil:
		out.RetryIn = max(st.HeartbeatAt.Add(takeoverAfter).Sub(st.Now), time.Second)
	case st.Status.Waiting() && st.NextRetryAt != nil:
		out.RetryIn = max(st.NextRetryAt.Sub(st.Now), time.Second)
	}
	return nil, &NotClaimableError{out}
}

// errCodeInterrupted marks a RETRY_WAIT left by Release, so the next claim is a resume.
const errCodeInterrupted = "interrupted"

// Heartbeat proves the attempt is alive. It returns whether a cancel was requested, or
// ErrFenced when the attempt no longer owns the task.
func (s *Store) Heartbeat(ctx context.Context, l Lease) (cancelRequested bool, err error) {
	err = s.prepared(ctx, &cancelRequested, `UPDATE tasks SET heartbeat_at = now() WHERE id = ? AND attempt = ? AND status = 'RUNNING' RETURNING cancel_requested`,
		l.TaskID, l.Attempt)
	return cancelRequested, fenced(err, "heartbeat", l)
}

// Progress records progress and a heartbeat for the attempt. Progress never goes down: a
// retried attempt that starts over keeps the high-water mark until it passes it.
func (s *Store) Progress(ctx context.Context, l Lease, current, total int64) (cancelRequested bool, err error) {
	err = s.prepared(ctx, &cancelRequested, `
		UPDATE tasks SET progress_current = GREATEST(progress_current, ?::bigint), progress_total = ?, heartbeat_at = now(), updated_at = now()
		WHERE id = ? AND attempt = ? AND status = 'RUNNING' RETURNING cancel_requested`,
		current, total, l.TaskID, l.Attempt)
	return cancelRequested, fenced(err, "record progress", l)
}

// Batch is what one committed batch of work advances.
type Batch struct {
	Checkpoint      json.RawMessage // where a resumed attempt starts
	TotalDelta      int64           // rows seen in this batch
	SuccessDelta    int64           // rows written
	FailedDelta     int64           // rows rejected
	ProgressCurrent int64
	ProgressTotal   int64
}

// CommitBatch runs write in one transaction with the batch's checkpoint, counts, progress and
// heartbeat, all fenced by the lease. It first locks the task row if, and only if, the lease
// still owns it: a superseded attempt writes nothing, and a takeover waits for the batch.
// write returns the Batch it committed, so the counts are what the write actually did.
func (s *Store) CommitBatch(ctx context.Context, l Lease, write func(ctx context.Context, tx bun.Tx) (Batch, error)) (cancelRequested bool, err error) {
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewRaw(`SELECT cancel_requested FROM tasks WHERE id = ? AND attempt = ? AND status = 'RUNNING' FOR UPDATE`,
			l.TaskID, l.Attempt).Scan(ctx, &cancelRequested)
		if err := fenced(err, "commit batch", l); err != nil {
			return err
		}
		b, err := write(ctx, tx)
		if err != nil {
			return err
		}
		_, err = tx.NewRaw(`
			UPDATE tasks SET checkpoint = ?::jsonb, total_count = total_count + ?, success_count = success_count + ?,
			       failed_count = failed_count + ?, progress_current = GREATEST(progress_current, ?), progress_total = ?,
			       heartbeat_at = now(), updated_at = now()
			WHERE id = ?`,
			nullJSON(b.Checkpoint), b.TotalDelta, b.SuccessDelta, b.FailedDelta, b.ProgressCurrent, b.ProgressTotal, l.TaskID).Exec(ctx)
		return err
	})
	return cancelRequested, err
}

// Outcome is how a successful attempt ended.
type Outcome struct {
	Status          Status // SUCCESS or PARTIAL_SUCCESS
	Result          json.RawMessage
	ResultExpiresAt *time.Time
	Message         string // for the task log
}

// Succeed ends the attempt: RUNNING → SUCCESS or PARTIAL_SUCCESS.
func (s *Store) Succeed(ctx context.Context, l Lease, o Outcome) (*Task, error) {
	if o.Status != StatusSuccess && o.Status != StatusPartialSuccess {
		return nil, fmt.Errorf("succeed %s: status %s is not a success", l, o.Status)
	}
	msg := o.Message // the run row records the outcome; the narrative gets what the job said
	return s.endAttempt(ctx, l, endAttempt{
		op: "succeed", to: o.Status,
		set:  "result = ?::jsonb, result_expires_at = ?, progress_current = GREATEST(progress_current, progress_total), error_code = NULL, error_message = NULL, finished_at = now()",
		args: []any{nullJSON(o.Result), o.ResultExpiresAt},
		log:  msg,
	})
}

// Fail ends the attempt and the task: RUNNING → FAILED. Bad input, or retries exhausted.
// The caller alerts when it returns without error: that happens once per failure.
func (s *Store) Fail(ctx context.Context, l Lease, code, message string) (*Task, error) {
	return s.endAttempt(ctx, l, endAttempt{
		op: "fail", to: StatusFailed,
		set:   "error_code = ?, error_message = ?, finished_at = now()",
		args:  []any{code, message},
		error: message, level: "error", log: "failed: " + message,
	})
}

// RetryLater ends the attempt on a transient error: RUNNING → RETRY_WAIT, due after delay.
func (s *Store) RetryLater(ctx context.Context, l Lease, code, message string, delay time.Duration) (*Task, error) {
	return s.endAttempt(ctx, l, endAttempt{
		op: "schedule a retry of", to: StatusRetryWait,
		set:   "retry_count = retry_count + 1, next_retry_at = now() + make_interval(secs => ?), error_code = ?, error_message = ?, enqueued_at = now()",
		args:  []any{delay.Seconds(), code, message},
		error: message, level: "warn", log: fmt.Sprintf("attempt failed, retrying in %s: %s", delay.Round(time.Second), message),
	})
}

// Release hands an interrupted attempt back without spending a retry: RUNNING → RETRY_WAIT,
// due at once. Used at shutdown; the next attempt resumes from the checkpoint.
func (s *Store) Release(ctx context.Context, l Lease, reason string) (*Task, error) {
	return s.endAttempt(ctx, l, endAttempt{
		op: "release", to: StatusRetryWait, runStatus: "INTERRUPTED",
		set:   "next_retry_at = now(), enqueued_at = now(), error_code = ?, error_message = ?",
		args:  []any{errCodeInterrupted, reason},
		error: reason, level: "warn", log: "interrupted, will resume: " + reason,
	})
}

// Cancelled ends an attempt whose cancel was requested: RUNNING → CANCELLED.
func (s *Store) Cancelled(ctx context.Context, l Lease) (*Task, error) {
	return s.endAttempt(ctx, l, endAttempt{
		op: "cancel", to: StatusCancelled, where: "AND cancel_requested",
		set: "finished_at = now()",
		log: "cancelled while running",
	})
}

// TimedOut ends an attempt that ran past its type's max runtime: RUNNING → TIMEOUT.
func (s *Store) TimedOut(ctx context.Context, l Lease, message string) (*Task, error) {
	return s.endAttempt(ctx, l, endAttempt{
		op: "time out", to: StatusTimeout,
		set:   "error_code = 'timeout', error_message = ?, finished_at = now()",
		args:  []any{message},
		error: message, level: "error", log: "timed out: " + message,
	})
}

type endAttempt struct {
	op        string
	to        Status
	set       string // extra SET assignments
	args      []any  // their arguments
	where     string // extra condition
	runStatus string // default: to
	error     string // task_runs.error
	level     string // task log level; default info
	log       string // task log message
}

// endAttempt moves a RUNNING task owned by l to e.to, closes the attempt's run and logs it.
func (s *Store) endAttempt(ctx context.Context, l Lease, e endAttempt) (*Task, error) {
	args := append([]any{string(e.to)}, e.args...)
	args = append(args, l.TaskID, l.Attempt,
		cmp.Or(e.runStatus, string(e.to)), nullString(e.error), cmp.Or(e.level, "info"), e.log, e.log)
	task := new(Task)
	err := s.prepared(ctx, task, `
		WITH t AS (
			UPDATE tasks SET status = ?, `+e.set+`, updated_at = now()
			WHERE id = ? AND attempt = ? AND status = 'RUNNING' `+e.where+`
			RETURNING *
		), r AS (
			UPDATE task_runs r SET status = ?, error = ?, finished_at = now()
			FROM t WHERE r.task_id = t.id AND r.attempt = t.attempt
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message) SELECT id, attempt, ?, ?::text FROM t WHERE ?::text <> ''
		)
		SELECT * FROM t`, args...)
	if err := fenced(err, e.op, l); err != nil {
		return nil, err
	}
	return task, nil
}

// TimeoutStale is the cleanup's transition: RUNNING tasks whose heartbeat is older than
// their type's timeout_seconds → TIMEOUT, at most limit of them. Their worker is gone (or
// cut off); if it comes back, its fenced writes change nothing.
func (s *Store) TimeoutStale(ctx context.Context, limit int) ([]Task, error) {
	var tasks []Task
	err := s.db.NewRaw(sqlTimeoutStale, limit).Scan(ctx, &tasks)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("time out stale tasks: %w", err)
	}
	return tasks, nil
}

// sqlTimeoutStale times out at most ? silent RUNNING tasks (see TimeoutStale).
const sqlTimeoutStale = `
		WITH stale AS (
			SELECT id FROM tasks
			WHERE status = 'RUNNING' AND heartbeat_at < now() - make_interval(secs => timeout_seconds)
			ORDER BY heartbeat_at LIMIT ? FOR UPDATE SKIP LOCKED
		), t AS (
			UPDATE tasks t SET status = 'TIMEOUT', error_code = 'timeout', finished_at = now(), updated_at = now(),
			       error_message = 'the worker stopped reporting for ' || t.timeout_seconds || ' seconds'
			FROM stale WHERE t.id = stale.id AND t.status = 'RUNNING'
			RETURNING t.*
		), r AS (
			UPDATE task_runs r SET status = 'TIMEOUT', finished_at = now(), error = 'no heartbeat since ' || t.heartbeat_at
			FROM t WHERE r.task_id = t.id AND r.attempt = t.attempt AND r.finished_at IS NULL
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message)
			SELECT id, attempt, 'error', 'timed out: no heartbeat for ' || timeout_seconds || 's' FROM t
		)
		SELECT * FROM t`

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
// requested. A terminal task answers *ConflictError.
func (s *Store) Cancel(ctx context.Context, taskNo string, scope Scope) (*CancelResult, error) {
	var row struct {
		Task
		PrevStatus Status `bun:"prev_status"`
	}
	err := s.db.NewRaw(`
		WITH old AS (
			SELECT id, status FROM tasks WHERE task_no = ? AND (? OR owner = ?) FOR UPDATE
		), t AS (
			UPDATE tasks t
			SET status = CASE WHEN old.status = 'RUNNING' THEN 'RUNNING' ELSE 'CANCELLED' END,
			    cancel_requested = true, next_retry_at = NULL,
			    finished_at = CASE WHEN old.status = 'RUNNING' THEN NULL ELSE now() END, updated_at = now()
			FROM old WHERE t.id = old.id AND old.status IN ('PENDING', 'RETRY_WAIT', 'RUNNING')
			RETURNING t.*, old.status AS prev_status
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message)
			SELECT id, attempt, 'info', CASE WHEN prev_status = 'RUNNING' THEN 'cancel requested by ' ELSE 'cancelled by ' END || ?
			FROM t
		)
		SELECT * FROM t`, taskNo, scope.Admin, scope.Owner, scope.Owner).Scan(ctx, &row)
	if err == nil {
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
func (s *Store) Retry(ctx context.Context, taskNo string, scope Scope) (*Task, error) {
	task := new(Task)
	err := s.db.NewRaw(`
		WITH t AS (
			UPDATE tasks SET status = 'PENDING', retry_count = 0, next_retry_at = NULL, cancel_requested = false,
			       error_code = NULL, error_message = NULL, finished_at = NULL, enqueued_at = now(), updated_at = now()
			WHERE task_no = ? AND (? OR owner = ?) AND status IN ('FAILED', 'TIMEOUT', 'CANCELLED')
			RETURNING *
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message) SELECT id, attempt, 'info', 'retry requested by ' || ? FROM t
		)
		SELECT * FROM t`, taskNo, scope.Admin, scope.Owner, scope.Owner).Scan(ctx, task)
	if err == nil {
		return task, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("retry task %s: %w", taskNo, err)
	}
	return nil, s.refusal(ctx, taskNo, scope, "retry")
}

// ExpediteRetry makes a RETRY_WAIT task due now instead of at its back-off time (the
// console's "run now" on a scheduled retry). who is recorded in the task log. A task in any
// other status answers *ConflictError.
func (s *Store) ExpediteRetry(ctx context.Context, taskNo string, who string) (*Task, error) {
	task := new(Task)
	err := s.db.NewRaw(`
		WITH t AS (
			UPDATE tasks SET next_retry_at = now(), updated_at = now()
			WHERE task_no = ? AND status = 'RETRY_WAIT'
			RETURNING *
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message) SELECT id, attempt, 'info', 'retry brought forward by ' || ? FROM t
		)
		SELECT * FROM t`, taskNo, who).Scan(ctx, task)
	if err == nil {
		return task, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("expedite retry of task %s: %w", taskNo, err)
	}
	return nil, s.refusal(ctx, taskNo, Scope{Admin: true}, "run now")
}

// refusal explains a refused API transition: not found, or a conflict with the status.
func (s *Store) refusal(ctx context.Context, taskNo string, scope Scope, op string) error {
	t, err := s.Get(ctx, taskNo, scope)
	if err != nil {
		return err
	}
	return &ConflictError{Op: op, Status: t.Status}
}

// MarkEnqueueFailed records that handing a waiting task to asynq failed, so the rescuer
// picks it up at its next round instead of after the grace period.
func (s *Store) MarkEnqueueFailed(ctx context.Context, taskID int64, attempt int) error {
	_, err := s.db.NewRaw(`UPDATE tasks SET enqueued_at = NULL WHERE id = ? AND attempt = ? AND status IN ('PENDING', 'RETRY_WAIT')`,
		taskID, attempt).Exec(ctx)
	return err
}

// fenced maps "no row" of a lease-fenced write to ErrFenced.
func fenced(err error, op string, l Lease) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s %s: %w", op, l, ErrFenced)
	default:
		return fmt.Errorf("%s %s: %w", op, l, err)
	}
}

func nullJSON(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
