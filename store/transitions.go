package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/task"
)

// This file holds every task state transition (DESIGN §3). Each one is a single conditional
// UPDATE: it names the statuses it may leave, and running attempts are fenced by their lease
// (`AND attempt = $n`), so a transition either happens exactly once or changes nothing.
// The attempt's task_runs row and a task_logs line are written in the same statement.
//
// Two rules hold in the SQL of every way out of RUNNING, not in the callers:
//   - a cancel that was requested wins over every outcome but success: an attempt that ends
//     with an error, hands its task back, or times out while a cancel is pending ends the
//     task CANCELLED, so a cancelled task is never run again;
//   - a finished attempt's work that completed stays what it is: success is recorded even
//     when the cancel arrived after the last batch.

// Store reads and writes tasks.
type Store struct {
	db *bun.DB
}

// New returns a Store over db.
func New(db *bun.DB) *Store { return &Store{db: db} }

// NewTask is what a submit knows about a task.
type NewTask struct {
	TaskNo         string
	Type           string
	Title          string
	Owner          string
	Queue          string
	Priority       int
	BizKey         string // empty: no idempotency key
	Params         json.RawMessage
	RequestID      string
	MaxRetry       int
	TimeoutSeconds int
	// RetryBase, MaxRuntime and StallAfter complete the policy fixed on the row (see
	// migration task_policy).
	RetryBase, MaxRuntime, StallAfter time.Duration
	// Notify, when set, is the webhook subscription the task is submitted with (its Owner is
	// the task's): it commits with the task, or neither does.
	Notify *NewSubscription
	// Audit is who submitted it, for its audit row; nil: the audit of CreateMany's context.
	// Tasks of several requests written in one statement each carry their request's.
	Audit *Audit
}

// Create inserts a PENDING task: (new) → PENDING. When a task with the same owner, type and
// biz key exists, it returns that one and created=false instead.
func (s *Store) Create(ctx context.Context, nt NewTask) (task *Task, created bool, err error) {
	res, err := s.CreateMany(ctx, []NewTask{nt})
	if err != nil {
		return nil, false, err
	}
	return res[0].Task, res[0].Created, nil
}

// Created is one task of CreateMany: the new task, or the existing one with the same key.
type Created struct {
	Task    *Task
	Created bool
	// Subscription is the new task's Notify subscription, committed with it.
	Subscription *Subscription
}

// CreateMany inserts many PENDING tasks in one statement (one transaction), each with its
// events row; for a task whose owner, type and biz key already exist (in the table, or earlier
// in the same batch) it returns the existing task and Created=false. Results are in the order
// of nts.
func (s *Store) CreateMany(ctx context.Context, nts []NewTask) ([]Created, error) {
	n := len(nts)
	var (
		nos, types, owners, queues, keys = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		params, requests, titles         = make([]string, n), make([]string, n), make([]string, n)
		priorities, retries, timeouts    = make([]int32, n), make([]int32, n), make([]int32, n)
		retryBases, runtimes, stalls     = make([]int64, n), make([]int64, n), make([]int64, n)
		actors, vias, addrs, auditReqs   = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		audits                           = make([]*Audit, n)
		subNos, subURLs, subEvents       = make([]string, n), make([]string, n), make([]string, n)
		subSecrets, subBys               = make([]string, n), make([]string, n)
	)
	for i, nt := range nts {
		nos[i], types[i], owners[i], queues[i], keys[i] = nt.TaskNo, nt.Type, nt.Owner, nt.Queue, nt.BizKey
		params[i], requests[i], titles[i] = cmp.Or(string(nt.Params), "{}"), nt.RequestID, nt.Title
		priorities[i], retries[i], timeouts[i] = int32(nt.Priority), int32(nt.MaxRetry), int32(nt.TimeoutSeconds)
		retryBases[i], runtimes[i], stalls[i] = nt.RetryBase.Milliseconds(), nt.MaxRuntime.Milliseconds(), nt.StallAfter.Milliseconds()
		if ns := nt.Notify; ns != nil {
			subNos[i], subURLs[i], subEvents[i] = newNo("whk_"), ns.URL, strings.Join(ns.Events, ",")
			subSecrets[i], subBys[i] = ns.Secret, ns.CreatedBy
		}
		audits[i] = nt.Audit
		if audits[i] == nil {
			audits[i] = AuditOf(ctx)
		}
		if a := audits[i]; a != nil && a.Actor != "" {
			actors[i], vias[i], addrs[i], auditReqs[i] = a.Actor, a.Via, a.ClientAddr, a.RequestID
		}
	}
	var rows []Task
	err := all(ctx, s.db, s.db.DB, &rows, `
		WITH v AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[],
			                     $9::int[], $10::int[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
			                     $16::bigint[], $17::bigint[], $18::bigint[], $19::text[], $20::text[], $21::text[], $22::text[],
			                     $23::text[]) WITH ORDINALITY
			AS v(task_no, type, owner, queue, priority, biz_key, params, request_id, max_retry, timeout_seconds, title,
			     actor, via, client_addr, audit_request_id, retry_base_ms, max_runtime_ms, stall_after_ms,
			     sub_no, sub_url, sub_events, sub_secret, sub_by, ord)
		), t AS (
			-- A task submitted with its subscription is bound to it from the start (see
			-- CreateTaskSubscription): its events are left for the dispatcher.
			INSERT INTO tasks (task_no, type, owner, queue, priority, biz_key, status, params, request_id,
			                   max_retry, timeout_seconds, enqueued_at, title, retry_base_ms, max_runtime_ms, stall_after_ms,
			                   webhook_bound)
			SELECT task_no, type, owner, queue, priority, NULLIF(biz_key, ''), 'PENDING', params::jsonb, NULLIF(request_id, ''),
			       max_retry, timeout_seconds, now(), title, retry_base_ms, max_runtime_ms, stall_after_ms, sub_url <> ''
			FROM v ORDER BY ord
			ON CONFLICT (owner, type, biz_key) WHERE biz_key IS NOT NULL DO NOTHING
			RETURNING *
		), sub AS (
			INSERT INTO webhook_subscriptions (sub_no, owner, url, events, secret, task_id, created_by)
			SELECT v.sub_no, t.owner, v.sub_url, string_to_array(v.sub_events, ','), v.sub_secret, t.id, v.sub_by
			FROM t JOIN v ON v.task_no = t.task_no WHERE v.sub_url <> ''
		), ev AS (
			`+insertEvents(eventName, `owner`, `t`)+`
		), au AS (
			INSERT INTO audit_events (actor, via, action, target, outcome, client_addr, request_id)
			SELECT v.actor, v.via, 'task.submit', t.task_no, 'success', v.client_addr, v.audit_request_id
			FROM t JOIN v ON v.task_no = t.task_no WHERE v.actor <> ''
		)
		SELECT `+taskColumns+` FROM t`,
		nos, types, owners, queues, priorities, keys, params, requests, retries, timeouts, titles, actors, vias, addrs, auditReqs,
		retryBases, runtimes, stalls, subNos, subURLs, subEvents, subSecrets, subBys)
	if err != nil {
		return nil, fmt.Errorf("create tasks: %w", err)
	}
	byNo := make(map[string]*Task, len(rows))
	for i := range rows {
		byNo[rows[i].TaskNo] = &rows[i]
	}
	out := make([]Created, n)
	for i, nt := range nts {
		if t := byNo[nt.TaskNo]; t != nil {
			out[i] = Created{Task: t, Created: true}
			if ns := nt.Notify; ns != nil {
				// What the statement inserted: now() is the task's created_at too.
				out[i].Subscription = &Subscription{SubNo: subNos[i], Owner: t.Owner, URL: ns.URL, Events: ns.Events,
					Secret: ns.Secret, TaskID: &t.ID, CreatedBy: ns.CreatedBy, CreatedAt: t.CreatedAt}
			}
			if a := audits[i]; a != nil && a.Actor != "" {
				a.count(1)
			}
			continue
		}
		if nt.BizKey == "" {
			return nil, fmt.Errorf("create task %s: not inserted", nt.TaskNo)
		}
		existing, err := s.FindByKey(ctx, nt.Owner, nt.Type, nt.BizKey)
		if err != nil {
			return nil, fmt.Errorf("find task with the same key: %w", err)
		}
		out[i] = Created{Task: existing}
	}
	return out, nil
}

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

// Claim gives worker the task: PENDING or due RETRY_WAIT → RUNNING, or RUNNING whose
// heartbeat is older than takeoverAfter → RUNNING (takeover, which spends one retry). The
// attempt number goes up by one; it is the lease every later write of this execution must
// carry. Exactly one of any number of concurrent claimers wins; the others get
// *NotClaimableError.
//
// A takeover never runs a task the rules say is over: when its cancel was requested the task
// ends CANCELLED, and when its retries are used up (a task that keeps killing its workers)
// it ends FAILED with an alert due; both answer *ClaimEndedError. So retry_count never
// exceeds max_retry.
func (s *Store) Claim(ctx context.Context, taskID int64, worker string, takeoverAfter time.Duration) (*Claimed, error) {
	return s.claim(ctx, s.db.DB, taskID, worker, takeoverAfter)
}

// ClaimCapped is Claim under a fair-share cap: when the task's owner already has
// maxRunning RUNNING tasks in the task's queue, a waiting task is not claimed and the
// answer is *NotClaimableError with OwnerAtCap set (the task waits; no retry is spent). The
// count and the claim run under a per-(queue, owner) advisory lock, so concurrent claimers
// cannot overshoot the cap. maxRunning <= 0 is Claim.
func (s *Store) ClaimCapped(ctx context.Context, taskID int64, worker string, takeoverAfter time.Duration, maxRunning int) (*Claimed, error) {
	if maxRunning <= 0 {
		return s.Claim(ctx, taskID, worker, takeoverAfter)
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
		err := one(ctx, s.db, tx.Tx, &who, `SELECT queue, owner, status, attempt FROM tasks WHERE id = $1`, taskID)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if who.Status.Waiting() {
			if _, err := exec(ctx, tx.Tx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 0))`, who.Queue, who.Owner); err != nil {
				return err
			}
			var running int
			err := one(ctx, s.db, tx.Tx, &running, `
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
		claimed, err = s.claim(ctx, tx.Tx, taskID, worker, takeoverAfter)
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

func (s *Store) claim(ctx context.Context, q querier, taskID int64, worker string, takeoverAfter time.Duration) (*Claimed, error) {
	res, err := s.claimMany(ctx, q, []int64{taskID}, worker, takeoverAfter)
	if err != nil {
		return nil, err
	}
	r := res[taskID]
	return r.Claimed, r.Err
}

// ClaimResult is one task's answer from ClaimMany: a claim, or why not (*NotClaimableError,
// *ClaimEndedError, ErrNotFound).
type ClaimResult struct {
	Claimed *Claimed
	Err     error
}

// ClaimMany claims many tasks for worker in one statement (one transaction, one fsync): the
// claim batcher's flush. Each task follows Claim's rules on its own; ids must be distinct.
func (s *Store) ClaimMany(ctx context.Context, ids []int64, worker string, takeoverAfter time.Duration) (map[int64]ClaimResult, error) {
	return s.claimMany(ctx, s.db.DB, ids, worker, takeoverAfter)
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
			    error_code = CASE WHEN decision.d = 'cancel' THEN NULL ELSE 'retries_exhausted' END,
			    error_message = CASE WHEN decision.d = 'cancel' THEN NULL
			        ELSE 'the worker running this task stopped responding ' || (t.retry_count + 1) || ' times; giving up' END,
			    alert_due_at = CASE WHEN decision.d = 'give_up' THEN now() ELSE t.alert_due_at END,
			    finished_at = now(), next_retry_at = NULL, updated_at = now()
			FROM decision
			WHERE t.id = decision.id AND decision.d IN ('cancel', 'give_up')
			RETURNING t.*, 'RUNNING'::text AS prev_status, 'ended'::text AS trigger
		), superseded AS (
			UPDATE task_runs r SET status = CASE WHEN e.id IS NULL THEN 'SUPERSEDED' ELSE e.status END, finished_at = now(),
			       error = 'no heartbeat for ' || $3::float8 || 's; ' || CASE WHEN e.id IS NULL THEN 'taken over by ' || $2
			               WHEN e.status = 'CANCELLED' THEN 'cancelled as requested' ELSE 'retries used up' END
			FROM (SELECT id, attempt - 1 AS attempt FROM claimed WHERE prev_status = 'RUNNING'
			      UNION ALL SELECT id, attempt FROM ended) dead
			LEFT JOIN ended e ON e.id = dead.id
			WHERE r.task_id = dead.id AND r.attempt = dead.attempt AND r.finished_at IS NULL
		), run AS (
			INSERT INTO task_runs (task_id, attempt, trigger, worker, status)
			SELECT id, attempt, trigger, worker, 'RUNNING' FROM claimed
		), lg AS (
			-- The run row records every attempt; the narrative only notes the unusual ones.
			INSERT INTO task_logs (task_id, attempt, level, message)
			SELECT id, attempt, CASE WHEN prev_status = 'RUNNING' THEN 'warn' ELSE 'info' END,
			       'attempt ' || attempt || ' started on ' || worker || ' (' || trigger || ')'
			FROM claimed WHERE attempt > 1
			UNION ALL
			SELECT id, attempt, CASE WHEN status = 'CANCELLED' THEN 'info' ELSE 'error' END,
			       CASE WHEN status = 'CANCELLED' THEN 'cancelled as requested; its worker had stopped responding'
			            ELSE 'failed: ' || error_message END
			FROM ended
		), ev AS (
			` + insertEvents(eventName, `$2`, `(SELECT * FROM claimed UNION ALL SELECT * FROM ended) c`) + `
		)
		SELECT ` + taskColumns + `, prev_status, trigger FROM claimed
		UNION ALL
		SELECT ` + taskColumns + `, prev_status, trigger FROM ended`

func (s *Store) claimMany(ctx context.Context, q querier, ids []int64, worker string, takeoverAfter time.Duration) (map[int64]ClaimResult, error) {
	var rows []struct {
		Task
		PrevStatus Status `bun:"prev_status"` // the status the claim left
		Trigger    string `bun:"trigger"`     // how this attempt came about, or "ended"
	}
	if err := all(ctx, s.db, q, &rows, sqlClaim, ids, worker, takeoverAfter.Seconds()); err != nil {
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
	if err := all(ctx, s.db, q, &states, `SELECT id, status, attempt, heartbeat_at, next_retry_at, now() AS now FROM tasks WHERE id = ANY($1::bigint[])`,
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

// errCodeInterrupted marks a RETRY_WAIT left by Release, so the next claim is a resume.
const errCodeInterrupted = "interrupted"

// Heartbeat proves the attempt is alive. It returns whether a cancel was requested, or
// ErrFenced when the attempt no longer owns the task.
func (s *Store) Heartbeat(ctx context.Context, l Lease) (cancelRequested bool, err error) {
	err = one(ctx, s.db, s.db.DB, &cancelRequested,
		`UPDATE tasks SET heartbeat_at = now() WHERE id = $1 AND attempt = $2 AND status = 'RUNNING' RETURNING cancel_requested`,
		l.TaskID, l.Attempt)
	return cancelRequested, fenced(err, "heartbeat", l)
}

// HeartbeatMany proves many attempts alive in one statement (a process's running attempts,
// once per interval). It returns, for each attempt that still owns its task, whether a cancel
// was requested; an attempt missing from the result is fenced.
func (s *Store) HeartbeatMany(ctx context.Context, leases []Lease) (map[int64]bool, error) {
	ids := make([]int64, len(leases))
	attempts := make([]int32, len(leases))
	for i, l := range leases {
		ids[i], attempts[i] = l.TaskID, int32(l.Attempt)
	}
	var rows []struct {
		ID              int64 `bun:"id"`
		CancelRequested bool  `bun:"cancel_requested"`
	}
	err := all(ctx, s.db, s.db.DB, &rows, `
		UPDATE tasks SET heartbeat_at = now()
		FROM unnest($1::bigint[], $2::int[]) AS v(id, attempt)
		WHERE tasks.id = v.id AND tasks.attempt = v.attempt AND tasks.status = 'RUNNING'
		RETURNING tasks.id, tasks.cancel_requested`, ids, attempts)
	if err != nil {
		return nil, fmt.Errorf("heartbeat %d attempts: %w", len(leases), err)
	}
	out := make(map[int64]bool, len(rows))
	for _, r := range rows {
		out[r.ID] = r.CancelRequested
	}
	return out, nil
}

// Progress records progress and a heartbeat for the attempt. Progress never goes down: a
// retried attempt that starts over keeps the high-water mark until it passes it.
func (s *Store) Progress(ctx context.Context, l Lease, current, total int64) (cancelRequested bool, err error) {
	err = one(ctx, s.db, s.db.DB, &cancelRequested, `
		UPDATE tasks SET progress_current = GREATEST(progress_current, $1::bigint), progress_total = $2, heartbeat_at = now(), updated_at = now()
		WHERE id = $3 AND attempt = $4 AND status = 'RUNNING' RETURNING cancel_requested`,
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
		err := one(ctx, s.db, tx.Tx, &cancelRequested,
			`SELECT cancel_requested FROM tasks WHERE id = $1 AND attempt = $2 AND status = 'RUNNING' FOR UPDATE`,
			l.TaskID, l.Attempt)
		if err := fenced(err, "commit batch", l); err != nil {
			return err
		}
		b, err := write(ctx, tx)
		if err != nil {
			return err
		}
		_, err = exec(ctx, tx.Tx, `
			UPDATE tasks SET checkpoint = $1::jsonb, total_count = total_count + $2, success_count = success_count + $3,
			       failed_count = failed_count + $4, progress_current = GREATEST(progress_current, $5::bigint), progress_total = $6,
			       heartbeat_at = now(), updated_at = now()
			WHERE id = $7`,
			nullJSON(b.Checkpoint), b.TotalDelta, b.SuccessDelta, b.FailedDelta, b.ProgressCurrent, b.ProgressTotal, l.TaskID)
		return err
	})
	return cancelRequested, err
}

// Outcome is how an attempt whose work ran to the end turned out (see task.Outcome).
type Outcome struct {
	Status Status // SUCCESS, PARTIAL_SUCCESS, or FAILED when the work judged its whole input bad
	// ErrorCode and ErrorMessage say why a FAILED outcome failed (required for it).
	ErrorCode, ErrorMessage string
	Result                  json.RawMessage
	ResultExpiresAt         *time.Time
	// Counts, when set, are the task's final counts (an export's rows written), and its
	// progress ends at their total; nil keeps the counts its batches committed.
	Counts  *task.Counts
	Message string // for the task log
}

// Succeed ends the attempt with the outcome of its finished work: RUNNING → SUCCESS,
// PARTIAL_SUCCESS, or FAILED (every row rejected), with its result. A cancel requested after
// the work was done does not undo it: the task ends by its real outcome, and the log says so.
func (s *Store) Succeed(ctx context.Context, l Lease, o Outcome) (*Task, error) {
	return s.endAttempt(ctx, l, SuccessEnding(l, o).e)
}

// Fail ends the attempt and the task on bad input: RUNNING → FAILED (CANCELLED when a cancel
// was requested). No alert: the submitter's input is at fault, not the system.
func (s *Store) Fail(ctx context.Context, l Lease, code, message string) (*Task, error) {
	return s.endAttempt(ctx, l, ending{op: "fail", to: StatusFailed, cancelWins: true, errorCode: code,
		errorMessage: message, runError: message, level: "error", log: "failed: " + message})
}

// GiveUp ends the attempt and the task when its retries are used up: RUNNING → FAILED, with
// an alert due (CANCELLED, and no alert, when a cancel was requested). The alert is recorded
// on the row and sent by whoever claims it (ClaimAlert), so it goes out exactly once.
func (s *Store) GiveUp(ctx context.Context, l Lease, code, message string) (*Task, error) {
	return s.endAttempt(ctx, l, ending{op: "give up", to: StatusFailed, cancelWins: true, errorCode: code,
		errorMessage: message, runError: message, alert: true, level: "error", log: "failed: " + message})
}

// RetryLater ends the attempt on a transient error: RUNNING → RETRY_WAIT, due after delay
// (CANCELLED when a cancel was requested).
func (s *Store) RetryLater(ctx context.Context, l Lease, code, message string, delay time.Duration) (*Task, error) {
	secs := delay.Seconds()
	return s.endAttempt(ctx, l, ending{op: "schedule a retry of", to: StatusRetryWait, cancelWins: true, errorCode: code,
		errorMessage: message, retryDelta: 1, retryInSecs: &secs, runError: message, level: "warn",
		log: fmt.Sprintf("attempt failed, retrying in %s: %s", delay.Round(time.Second), message)})
}

// Release hands an interrupted attempt back without spending a retry: RUNNING → RETRY_WAIT,
// due at once (CANCELLED when a cancel was requested). Used at shutdown; the next attempt
// resumes from the checkpoint.
func (s *Store) Release(ctx context.Context, l Lease, reason string) (*Task, error) {
	now := 0.0
	return s.endAttempt(ctx, l, ending{op: "release", to: StatusRetryWait, runStatus: "INTERRUPTED", cancelWins: true,
		errorCode: errCodeInterrupted, errorMessage: reason, retryInSecs: &now, runError: reason, level: "warn",
		log: "interrupted, will resume: " + reason})
}

// Cancelled ends an attempt whose cancel was requested: RUNNING → CANCELLED.
func (s *Store) Cancelled(ctx context.Context, l Lease) (*Task, error) {
	return s.endAttempt(ctx, l, ending{op: "cancel", to: StatusCancelled, needCancel: true, log: "cancelled while running"})
}

// TimedOut ends an attempt that ran past its type's max runtime or stalled: RUNNING → TIMEOUT
// (CANCELLED when a cancel was requested).
func (s *Store) TimedOut(ctx context.Context, l Lease, message string) (*Task, error) {
	return s.endAttempt(ctx, l, ending{op: "time out", to: StatusTimeout, cancelWins: true, errorCode: "timeout",
		errorMessage: message, runError: message, level: "error", log: "timed out: " + message})
}

// ending is one way an attempt ends; endAttempt turns it into the fenced UPDATE.
type ending struct {
	op              string
	to              Status
	cancelWins      bool     // a requested cancel turns this ending into CANCELLED
	needCancel      bool     // only when a cancel was requested
	errorCode       string   // tasks.error_code (empty: NULL)
	errorMessage    string   // tasks.error_message
	retryDelta      int      // added to retry_count
	retryInSecs     *float64 // next_retry_at = now() + this; nil: NULL
	outcome         bool     // the work ran to the end: its result, expiry and full progress are written
	result          *string  // result jsonb, for an outcome
	resultExpiresAt *time.Time
	counts          *task.Counts // final counts; nil keeps the committed ones
	invalid         error        // why this ending must not be written
	alert           bool         // an alert is due once this commits
	runStatus       string       // task_runs.status; default: to
	runError        string       // task_runs.error
	level           string       // task log level; default info
	log             string       // task log message; empty: no line
}

// endAttempt moves a RUNNING task owned by l to e.to (or CANCELLED, see ending.cancelWins),
// closes the attempt's run and logs it, in one statement.
func (s *Store) endAttempt(ctx context.Context, l Lease, e ending) (*Task, error) {
	ended, err := s.endAttempts(ctx, []Ending{{Lease: l, e: e}})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.op, l, err)
	}
	if t := ended[l.TaskID]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%s %s: %w", e.op, l, ErrFenced)
}

// Ending is one attempt's terminal write, for EndAttempts.
type Ending struct {
	Lease Lease
	e     ending
}

// SuccessEnding is the ending Succeed writes, for EndAttempts. An outcome that is not one of
// finished work (see Outcome) makes the write fail without writing anything.
func SuccessEnding(l Lease, o Outcome) Ending {
	e := ending{op: "succeed", to: o.Status, outcome: true, result: nullJSON(o.Result), resultExpiresAt: o.ResultExpiresAt,
		counts: o.Counts, log: o.Message}
	switch {
	case o.Status.Succeeded():
	case o.Status == StatusFailed && o.ErrorCode != "":
		e.op, e.errorCode, e.errorMessage, e.runError, e.level = "fail", o.ErrorCode, o.ErrorMessage, o.ErrorMessage, "error"
	default:
		e.invalid = fmt.Errorf("end %s: %s with error code %q is not an outcome of finished work", l, o.Status, o.ErrorCode)
	}
	return Ending{Lease: l, e: e}
}

// EndAttempts writes many attempts' endings in one statement (one transaction, one fsync): the
// completer's flush. Each row is fenced on its own lease; the returned map holds the rows that
// ended, and an ending missing from it was fenced (its attempt no longer owns the task).
func (s *Store) EndAttempts(ctx context.Context, endings []Ending) (map[int64]*Task, error) {
	return s.endAttempts(ctx, endings)
}

func (s *Store) endAttempts(ctx context.Context, endings []Ending) (map[int64]*Task, error) {
	for _, en := range endings {
		if en.e.invalid != nil {
			return nil, en.e.invalid
		}
	}
	n := len(endings)
	var (
		ids                                     = make([]int64, n)
		attempts, retryDelta                    = make([]int32, n), make([]int32, n)
		cancelWins, needCancel, alert, hasRetry = make([]bool, n), make([]bool, n), make([]bool, n), make([]bool, n)
		hasResult, hasExpiry, outcome           = make([]bool, n), make([]bool, n), make([]bool, n)
		hasCounts                               = make([]bool, n)
		totals, successes, failures             = make([]int64, n), make([]int64, n), make([]int64, n)
		to, codes, messages, results            = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		runStatus, runErrors, levels, logs      = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		retryIn                                 = make([]float64, n)
		expires                                 = make([]time.Time, n)
	)
	for i, en := range endings {
		e := en.e
		ids[i], attempts[i] = en.Lease.TaskID, int32(en.Lease.Attempt)
		cancelWins[i], needCancel[i], alert[i] = e.cancelWins, e.needCancel, e.alert
		to[i], codes[i], messages[i], retryDelta[i] = string(e.to), e.errorCode, e.errorMessage, int32(e.retryDelta)
		if e.retryInSecs != nil {
			hasRetry[i], retryIn[i] = true, *e.retryInSecs
		}
		if e.result != nil {
			hasResult[i], results[i] = true, *e.result
		}
		if e.resultExpiresAt != nil {
			hasExpiry[i], expires[i] = true, *e.resultExpiresAt
		}
		if c := e.counts; c != nil {
			hasCounts[i], totals[i], successes[i], failures[i] = true, c.Total, c.Success, c.Failed
		}
		outcome[i] = e.outcome
		runStatus[i], runErrors[i] = cmp.Or(e.runStatus, string(e.to)), e.runError
		levels[i], logs[i] = cmp.Or(e.level, "info"), e.log
	}
	var rows []Task
	err := all(ctx, s.db, s.db.DB, &rows, `
		WITH v AS (
			SELECT * FROM unnest($1::bigint[], $2::int[], $3::bool[], $4::text[], $5::text[], $6::text[], $7::int[], $8::bool[],
			                     $9::float8[], $10::bool[], $11::text[], $12::bool[], $13::timestamptz[], $14::bool[], $15::bool[],
			                     $16::text[], $17::text[], $18::text[], $19::text[], $20::bool[], $21::bool[], $22::bigint[],
			                     $23::bigint[], $24::bigint[])
			AS v(id, attempt, cancel_wins, "to", code, message, retry_delta, has_retry, retry_in, has_result, result,
			     has_expiry, expires, alert, need_cancel, run_status, run_error, level, log, outcome, has_counts,
			     total, success, failed)
		), t AS (
			UPDATE tasks SET
			    status = CASE WHEN v.cancel_wins AND tasks.cancel_requested THEN 'CANCELLED' ELSE v."to" END,
			    error_code = CASE WHEN v.cancel_wins AND tasks.cancel_requested THEN NULL ELSE NULLIF(v.code, '') END,
			    error_message = CASE WHEN v.cancel_wins AND tasks.cancel_requested THEN NULL ELSE NULLIF(v.message, '') END,
			    retry_count = tasks.retry_count + CASE WHEN v.cancel_wins AND tasks.cancel_requested THEN 0 ELSE v.retry_delta END,
			    next_retry_at = CASE WHEN (v.cancel_wins AND tasks.cancel_requested) OR NOT v.has_retry THEN NULL
			                         ELSE now() + make_interval(secs => v.retry_in) END,
			    enqueued_at = CASE WHEN v."to" = 'RETRY_WAIT' AND NOT (v.cancel_wins AND tasks.cancel_requested) THEN now() ELSE tasks.enqueued_at END,
			    finished_at = CASE WHEN v."to" = 'RETRY_WAIT' AND NOT (v.cancel_wins AND tasks.cancel_requested) THEN NULL ELSE now() END,
			    result = CASE WHEN v.outcome THEN CASE WHEN v.has_result THEN v.result::jsonb END ELSE tasks.result END,
			    result_expires_at = CASE WHEN v.outcome THEN CASE WHEN v.has_expiry THEN v.expires END ELSE tasks.result_expires_at END,
			    -- Final counts are the task's one row total: its progress ends there too.
			    progress_current = CASE WHEN v.has_counts THEN v.total
			                            WHEN v.outcome THEN GREATEST(tasks.progress_current, tasks.progress_total)
			                            ELSE tasks.progress_current END,
			    progress_total = CASE WHEN v.has_counts THEN v.total ELSE tasks.progress_total END,
			    total_count = CASE WHEN v.has_counts THEN v.total ELSE tasks.total_count END,
			    success_count = CASE WHEN v.has_counts THEN v.success ELSE tasks.success_count END,
			    failed_count = CASE WHEN v.has_counts THEN v.failed ELSE tasks.failed_count END,
			    alert_due_at = CASE WHEN v.alert AND NOT (v.cancel_wins AND tasks.cancel_requested) THEN now() ELSE tasks.alert_due_at END,
			    updated_at = now()
			FROM v
			WHERE tasks.id = v.id AND tasks.attempt = v.attempt AND tasks.status = 'RUNNING' AND (tasks.cancel_requested OR NOT v.need_cancel)
			RETURNING tasks.*, (v.cancel_wins AND tasks.cancel_requested) AS cancel_won, v.run_status, v.run_error, v.level, v.log
		), r AS (
			UPDATE task_runs r SET status = CASE WHEN t.cancel_won THEN 'CANCELLED' ELSE t.run_status END,
			       error = NULLIF(t.run_error, ''), finished_at = now()
			FROM t WHERE r.task_id = t.id AND r.attempt = t.attempt
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message)
			SELECT id, attempt, CASE WHEN cancel_won THEN 'info' ELSE level END,
			       CASE WHEN cancel_won THEN 'cancelled as requested; the attempt was ending: ' || log ELSE log END
			FROM t WHERE log <> ''
		), ev AS (
			`+insertEvents(eventName, `worker`, `t`)+`
		)
		SELECT `+taskColumns+` FROM t`,
		ids, attempts, cancelWins, to, codes, messages, retryDelta, hasRetry, retryIn, hasResult, results, hasExpiry, expires,
		alert, needCancel, runStatus, runErrors, levels, logs, outcome, hasCounts, totals, successes, failures)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]*Task, len(rows))
	for i := range rows {
		out[rows[i].ID] = &rows[i]
	}
	return out, nil
}

// TimeoutStale is the cleanup's transition: RUNNING tasks whose heartbeat is older than
// their type's timeout_seconds → TIMEOUT (CANCELLED when a cancel was requested), at most
// limit of them. Their worker is gone (or cut off); if it comes back, its fenced writes change
// nothing.
func (s *Store) TimeoutStale(ctx context.Context, limit int) ([]Task, error) {
	var tasks []Task
	if err := all(ctx, s.db, s.db.DB, &tasks, sqlTimeoutStale, limit); err != nil {
		return nil, fmt.Errorf("time out stale tasks: %w", err)
	}
	return tasks, nil
}

// sqlTimeoutStale times out at most $1 silent RUNNING tasks (see TimeoutStale).
var sqlTimeoutStale = `
		WITH stale AS (
			SELECT id FROM tasks
			WHERE status = 'RUNNING' AND heartbeat_at < now() - make_interval(secs => timeout_seconds)
			ORDER BY heartbeat_at LIMIT $1 FOR UPDATE SKIP LOCKED
		), t AS (
			UPDATE tasks t SET status = CASE WHEN t.cancel_requested THEN 'CANCELLED' ELSE 'TIMEOUT' END,
			       error_code = CASE WHEN t.cancel_requested THEN NULL ELSE 'timeout' END,
			       error_message = CASE WHEN t.cancel_requested THEN NULL
			                       ELSE 'the worker stopped reporting for ' || t.timeout_seconds || ' seconds' END,
			       finished_at = now(), updated_at = now()
			FROM stale WHERE t.id = stale.id AND t.status = 'RUNNING'
			RETURNING t.*
		), r AS (
			UPDATE task_runs r SET status = t.status, finished_at = now(), error = 'no heartbeat since ' || t.heartbeat_at
			FROM t WHERE r.task_id = t.id AND r.attempt = t.attempt AND r.finished_at IS NULL
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message)
			SELECT id, attempt, CASE WHEN status = 'CANCELLED' THEN 'info' ELSE 'error' END,
			       CASE WHEN status = 'CANCELLED' THEN 'cancelled as requested; its worker had stopped reporting'
			            ELSE 'timed out: no heartbeat for ' || timeout_seconds || 's' END
			FROM t
		), ev AS (
			` + insertEvents(eventName, `'cleanup'`, `t`) + `
		)
		SELECT ` + taskColumns + ` FROM t`

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
func (s *Store) Cancel(ctx context.Context, taskNo string, scope Scope) (*CancelResult, error) {
	return s.CancelBy(ctx, taskNo, scope, scope.Owner)
}

// CancelBy is Cancel with the actor named separately from the scope (the console acts with
// admin scope on behalf of an operator).
func (s *Store) CancelBy(ctx context.Context, taskNo string, scope Scope, who string) (*CancelResult, error) {
	var row struct {
		Task
		PrevStatus Status `bun:"prev_status"`
	}
	err := one(ctx, s.db, s.db.DB, &row, `
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
			INSERT INTO task_logs (task_id, attempt, level, message)
			SELECT id, attempt, 'info', CASE WHEN prev_status = 'RUNNING' THEN 'cancel requested by ' ELSE 'cancelled by ' END || $4
			FROM t
		), ev AS (
			`+insertEvents(eventName, `$4`, `t`)+`
		), au AS (
			INSERT INTO audit_events (actor, via, action, target, outcome, detail, client_addr, request_id)
			SELECT $5::text, $6::text, 'task.cancel', task_no, 'success',
			       CASE WHEN prev_status = 'RUNNING' THEN 'cancel requested' ELSE 'cancelled' END, $7::text, $8::text
			FROM t WHERE $5::text <> ''
		)
		SELECT `+taskColumns+`, prev_status FROM t`, append([]any{taskNo, scope.Admin, scope.Owner, who}, auditParams(ctx)...)...)
	if err == nil {
		audited(ctx, 1)
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
func (s *Store) retry(ctx context.Context, taskNo string, scope Scope) (*Task, error) {
	row := new(Task)
	err := one(ctx, s.db, s.db.DB, row, `
		WITH t AS (
			UPDATE tasks SET status = 'PENDING', retry_count = 0, next_retry_at = NULL, cancel_requested = false,
			       error_code = NULL, error_message = NULL, finished_at = NULL, enqueued_at = now(), updated_at = now(),
			       alert_due_at = NULL, alerted_at = NULL
			WHERE task_no = $1 AND ($2 OR owner = $3) AND status IN ('FAILED', 'TIMEOUT', 'CANCELLED')
			  AND error_code IS DISTINCT FROM $8
			RETURNING *
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message) SELECT id, attempt, 'info', 'retry requested by ' || $3 FROM t
		), ev AS (
			`+insertEvents(`'`+task.EventRetried+`'`, `$3`, `t`)+`
		), au AS (
			INSERT INTO audit_events (actor, via, action, target, outcome, client_addr, request_id)
			SELECT $4::text, $5::text, 'task.retry', task_no, 'success', $6::text, $7::text FROM t WHERE $4::text <> ''
		)
		SELECT `+taskColumns+` FROM t`, append(append([]any{taskNo, scope.Admin, scope.Owner}, auditParams(ctx)...), task.CodeAllRowsRejected)...)
	if err == nil {
		audited(ctx, 1)
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
func (s *Store) ExpediteRetry(ctx context.Context, taskNo string, who string) (*Task, error) {
	task := new(Task)
	err := one(ctx, s.db, s.db.DB, task, `
		WITH t AS (
			UPDATE tasks SET next_retry_at = now(), updated_at = now()
			WHERE task_no = $1 AND status = 'RETRY_WAIT'
			RETURNING *
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message) SELECT id, attempt, 'info', 'retry brought forward by ' || $2 FROM t
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
func (s *Store) refusal(ctx context.Context, taskNo string, scope Scope, op string) error {
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

// MarkEnqueueFailed records that handing a waiting task to asynq failed, so the rescuer
// picks it up at its next round instead of after the grace period.
func (s *Store) MarkEnqueueFailed(ctx context.Context, taskID int64, attempt int) error {
	_, err := exec(ctx, s.db.DB,
		`UPDATE tasks SET enqueued_at = NULL WHERE id = $1 AND attempt = $2 AND status IN ('PENDING', 'RETRY_WAIT', 'RUNNING')`,
		taskID, attempt)
	return err
}

// ClaimAlert records that the failure alert of a task is being sent, and returns the task
// when this caller is the one to send it: at most one caller ever gets it.
func (s *Store) ClaimAlert(ctx context.Context, taskID int64) (*Task, error) {
	task := new(Task)
	err := one(ctx, s.db, s.db.DB, task, `
		UPDATE tasks SET alerted_at = now()
		WHERE id = $1 AND alert_due_at IS NOT NULL AND alerted_at IS NULL
		RETURNING `+taskColumns, taskID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim alert of task %d: %w", taskID, err)
	}
	return task, nil
}

// ClaimDueAlerts claims up to limit failure alerts that became due more than olderThan ago
// and were never sent (the process that failed the task died before sending). The caller
// sends them.
func (s *Store) ClaimDueAlerts(ctx context.Context, olderThan time.Duration, limit int) ([]Task, error) {
	var tasks []Task
	err := all(ctx, s.db, s.db.DB, &tasks, `
		UPDATE tasks SET alerted_at = now()
		WHERE id IN (`+sqlDueAlerts+` FOR UPDATE SKIP LOCKED)
		RETURNING `+taskColumns, olderThan.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim due alerts: %w", err)
	}
	return tasks, nil
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
