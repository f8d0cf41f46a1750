package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
)

// This file holds the endings of an attempt: the worker's (RUNNING → an outcome, RETRY_WAIT,
// FAILED, TIMEOUT or CANCELLED) and the cleanup's for attempts whose worker went silent.
//
// Two rules hold in the SQL of every way out of RUNNING, not in the callers:
//   - a cancel that was requested wins over every outcome but success: an attempt that ends
//     with an error, hands its task back, or times out while a cancel is pending ends the
//     task CANCELLED, so a cancelled task is never run again;
//   - a finished attempt's work that completed stays what it is: success is recorded even
//     when the cancel arrived after the last batch.

// errCodeInterrupted marks a RETRY_WAIT left by EndInterrupted, so the next claim is a resume.
const errCodeInterrupted = "interrupted"

// Outcome is how an attempt whose work ran to the end turned out (see task.Outcome).
type Outcome struct {
	Status Status // SUCCESS, PARTIAL_SUCCESS, or FAILED when the work judged its whole input bad
	// ErrorCode and ErrorMessage say why a FAILED outcome failed (required for it).
	ErrorCode, ErrorMessage string
	Result                  json.RawMessage
	ResultExpiresAt         *time.Time
	// Counts, when set, are the task's final counts (an export's rows written), and its
	// progress ends at their total; nil keeps the counts its batches committed.
	Counts *task.Counts
	// ErrorParams are the catalogue params of ErrorCode (internal/msg "error.<code>").
	ErrorParams msg.Params
	// Log is the task log line that says how the work ended ("log.imported", …); no code:
	// no line.
	Log msg.Message
}

// EndFinished ends the attempt with the outcome of its finished work: RUNNING → SUCCESS,
// PARTIAL_SUCCESS, or FAILED (every row rejected), with its result. A cancel requested after
// the work was done does not undo it: the task ends by its real outcome, and the log says so.
func (s *Attempts) EndFinished(ctx context.Context, l Lease, o Outcome) (*Task, error) {
	return s.endAttempt(ctx, l, FinishedEnding(l, o).e)
}

// EndFailed ends the attempt and the task on bad input: RUNNING → FAILED (CANCELLED when a
// cancel was requested). No alert: the submitter's input is at fault, not the system.
func (s *Attempts) EndFailed(ctx context.Context, l Lease, code, message string) (*Task, error) {
	return s.EndFailedWith(ctx, l, code, nil, message)
}

// EndFailedWith is EndFailed with the catalogue params of code (internal/msg "error.<code>"),
// so the failure reads in each reader's language.
func (s *Attempts) EndFailedWith(ctx context.Context, l Lease, code string, params msg.Params, message string) (*Task, error) {
	return s.endAttempt(ctx, l, ending{op: "fail", to: StatusFailed, cancelWins: true, errorCode: code, errorParams: params,
		errorMessage: message, runError: message, level: "error", log: failedLine(code, params, message)})
}

// failedLine is the log line of a failure: "failed: <message>".
func failedLine(code string, params msg.Params, message string) msg.Message {
	return withParams(msg.New("log.failed", "code", code, "error", message), params)
}

// withParams is m with params added (m's own win).
func withParams(m msg.Message, params msg.Params) msg.Message {
	for k, v := range params {
		if _, ok := m.Params[k]; !ok {
			m.Params[k] = v
		}
	}
	return m
}

// EndGaveUp ends the attempt and the task when its retries are used up: RUNNING → FAILED, with
// an alert due (CANCELLED, and no alert, when a cancel was requested). The alert is recorded
// on the row and sent by whoever claims it (ClaimAlert), so it goes out exactly once.
func (s *Attempts) EndGaveUp(ctx context.Context, l Lease, code, message string) (*Task, error) {
	return s.endAttempt(ctx, l, ending{op: "give up", to: StatusFailed, cancelWins: true, errorCode: code,
		errorMessage: message, runError: message, alert: true, level: "error", log: failedLine(code, nil, message)})
}

// EndRetryWait ends the attempt on a transient error: RUNNING → RETRY_WAIT, due after delay
// (CANCELLED when a cancel was requested).
func (s *Attempts) EndRetryWait(ctx context.Context, l Lease, code, message string, delay time.Duration) (*Task, error) {
	secs := delay.Seconds()
	return s.endAttempt(ctx, l, ending{op: "schedule a retry of", to: StatusRetryWait, cancelWins: true, errorCode: code,
		errorMessage: message, retryDelta: 1, retryInSecs: &secs, runError: message, level: "warn",
		log: msg.New("log.retrying", "delay", delay.Round(time.Second).String(), "code", code, "error", message)})
}

// EndInterrupted hands an interrupted attempt back without spending a retry: RUNNING →
// RETRY_WAIT, due at once (CANCELLED when a cancel was requested). Used at shutdown; the next
// attempt resumes from the checkpoint.
// reason is a catalogue code under "interrupt." ("interrupt.draining").
func (s *Attempts) EndInterrupted(ctx context.Context, l Lease, reason string) (*Task, error) {
	now := 0.0
	why := strings.TrimPrefix(reason, "interrupt.")
	text := msg.Render(msg.EN, "interrupt."+why, nil)
	if !msg.Known("interrupt." + why) {
		text = reason
	}
	return s.endAttempt(ctx, l, ending{op: "release", to: StatusRetryWait, runStatus: "INTERRUPTED", cancelWins: true,
		errorCode: errCodeInterrupted, errorParams: msg.Params{"reason": why}, errorMessage: text, retryInSecs: &now,
		runError: text, level: "warn", log: msg.New("log.interrupted", "reason", why)})
}

// EndCancelled ends an attempt whose cancel was requested: RUNNING → CANCELLED.
func (s *Attempts) EndCancelled(ctx context.Context, l Lease) (*Task, error) {
	return s.endAttempt(ctx, l, ending{op: "cancel", to: StatusCancelled, needCancel: true, log: msg.New("log.cancelled_running")})
}

// EndTimedOut ends an attempt that ran past its type's max runtime or stalled: RUNNING →
// TIMEOUT (CANCELLED when a cancel was requested).
func (s *Attempts) EndTimedOut(ctx context.Context, l Lease, message string) (*Task, error) {
	return s.endAttempt(ctx, l, ending{op: "time out", to: StatusTimeout, cancelWins: true, errorCode: "timeout",
		errorMessage: message, runError: message, level: "error", log: msg.New("log.timed_out", "code", "timeout", "error", message)})
}

// ending is one way an attempt ends; endAttempt turns it into the fenced UPDATE.
type ending struct {
	op              string
	to              Status
	cancelWins      bool       // a requested cancel turns this ending into CANCELLED
	needCancel      bool       // only when a cancel was requested
	errorCode       string     // tasks.error_code (empty: NULL)
	errorMessage    string     // tasks.error_message
	errorParams     msg.Params // tasks.error_params, task_runs.error_params
	retryDelta      int        // added to retry_count
	retryInSecs     *float64   // next_retry_at = now() + this; nil: NULL
	outcome         bool       // the work ran to the end: its result, expiry and full progress are written
	result          *string    // result jsonb, for an outcome
	resultExpiresAt *time.Time
	counts          *task.Counts // final counts; nil keeps the committed ones
	invalid         error        // why this ending must not be written
	alert           bool         // an alert is due once this commits
	runStatus       string       // task_runs.status; default: to
	runError        string       // task_runs.error
	level           string       // task log level; default info
	log             msg.Message  // task log line; no code: no line
}

// endAttempt moves a RUNNING task owned by l to e.to (or CANCELLED, see ending.cancelWins),
// closes the attempt's run and logs it, in one statement.
func (s *Attempts) endAttempt(ctx context.Context, l Lease, e ending) (*Task, error) {
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

// FinishedEnding is the ending EndFinished writes, for EndAttempts. An outcome that is not one
// of finished work (see Outcome) makes the write fail without writing anything.
func FinishedEnding(l Lease, o Outcome) Ending {
	e := ending{op: "succeed", to: o.Status, outcome: true, result: nullJSON(o.Result), resultExpiresAt: o.ResultExpiresAt,
		counts: o.Counts, log: o.Log, errorParams: o.ErrorParams}
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
func (s *Attempts) EndAttempts(ctx context.Context, endings []Ending) (map[int64]*Task, error) {
	return s.endAttempts(ctx, endings)
}

func (s *Attempts) endAttempts(ctx context.Context, endings []Ending) (map[int64]*Task, error) {
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
		errorParams, logCodes, logParams        = make([]string, n), make([]string, n), make([]string, n)
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
		levels[i] = cmp.Or(e.level, "info")
		if e.log.Code != "" {
			logs[i], logCodes[i], logParams[i] = e.log.English(), e.log.Code, paramsJSON(e.log.Params)
		}
		errorParams[i] = paramsJSON(e.errorParams)
	}
	var rows []Task
	err := pg.All(ctx, s.db, s.db.DB, &rows, sqlEndAttempts,
		ids, attempts, cancelWins, to, codes, messages, retryDelta, hasRetry, retryIn, hasResult, results, hasExpiry, expires,
		alert, needCancel, runStatus, runErrors, levels, logs, outcome, hasCounts, totals, successes, failures,
		errorParams, logCodes, logParams)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]*Task, len(rows))
	for i := range rows {
		out[rows[i].ID] = &rows[i]
	}
	return out, nil
}

// sqlEndAttempts writes the endings of the arrays $1 to $27 (see endAttempts), each fenced by
// its lease, and returns the tasks that ended.
var sqlEndAttempts = `
		WITH v AS (
			SELECT * FROM unnest($1::bigint[], $2::int[], $3::bool[], $4::text[], $5::text[], $6::text[], $7::int[], $8::bool[],
			                     $9::float8[], $10::bool[], $11::text[], $12::bool[], $13::timestamptz[], $14::bool[], $15::bool[],
			                     $16::text[], $17::text[], $18::text[], $19::text[], $20::bool[], $21::bool[], $22::bigint[],
			                     $23::bigint[], $24::bigint[], $25::text[], $26::text[], $27::text[])
			AS v(id, attempt, cancel_wins, "to", code, message, retry_delta, has_retry, retry_in, has_result, result,
			     has_expiry, expires, alert, need_cancel, run_status, run_error, level, log, outcome, has_counts,
			     total, success, failed, error_params, log_code, log_params)
		), t AS (
			UPDATE tasks SET
			    status = CASE WHEN v.cancel_wins AND tasks.cancel_requested THEN 'CANCELLED' ELSE v."to" END,
			    error_code = CASE WHEN v.cancel_wins AND tasks.cancel_requested THEN NULL ELSE NULLIF(v.code, '') END,
			    error_message = CASE WHEN v.cancel_wins AND tasks.cancel_requested THEN NULL ELSE NULLIF(v.message, '') END,
			    error_params = CASE WHEN v.cancel_wins AND tasks.cancel_requested THEN NULL ELSE NULLIF(v.error_params, '')::jsonb END,
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
			RETURNING tasks.*, (v.cancel_wins AND tasks.cancel_requested) AS cancel_won, v.run_status, v.run_error, v.level, v.log,
			          v.log_code, NULLIF(v.log_params, '')::jsonb AS log_params, NULLIF(v.code, '') AS run_error_code
		), r AS (
			UPDATE task_runs r SET status = CASE WHEN t.cancel_won THEN 'CANCELLED' ELSE t.run_status END,
			       error = NULLIF(t.run_error, ''), error_code = CASE WHEN t.run_error <> '' THEN t.run_error_code END,
			       error_params = CASE WHEN t.run_error <> '' THEN t.error_params END, finished_at = now()
			FROM t WHERE r.task_id = t.id AND r.attempt = t.attempt
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message, code, params)
			SELECT id, attempt, CASE WHEN cancel_won THEN 'info' ELSE level END,
			       CASE WHEN cancel_won THEN 'cancelled as requested; the attempt was ending: ' || log ELSE log END,
			       CASE WHEN cancel_won THEN 'log.cancelled_ending' ELSE log_code END,
			       CASE WHEN cancel_won THEN COALESCE(log_params, '{}') || jsonb_build_object('then', log, 'then_code', substr(log_code, 5))
			            ELSE log_params END
			FROM t WHERE log <> ''
		), ev AS (
			` + insertEvents(eventName, `worker`, `t`) + `
		)
		SELECT ` + taskColumns + ` FROM t`

// TimeoutStale is the cleanup's transition: RUNNING tasks whose heartbeat is older than
// their type's timeout_seconds → TIMEOUT (CANCELLED when a cancel was requested), at most
// limit of them. Their worker is gone (or cut off); if it comes back, its fenced writes change
// nothing.
func (s *Attempts) TimeoutStale(ctx context.Context, limit int) ([]Task, error) {
	return pg.List[Task](ctx, s.db, "time out stale tasks", sqlTimeoutStale, limit)
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
			       error_params = CASE WHEN t.cancel_requested THEN NULL
			                      ELSE jsonb_build_object('seconds', t.timeout_seconds::text) END,
			       finished_at = now(), updated_at = now()
			FROM stale WHERE t.id = stale.id AND t.status = 'RUNNING'
			RETURNING t.*
		), r AS (
			UPDATE task_runs r SET status = t.status, finished_at = now(), error = 'no heartbeat since ' || t.heartbeat_at,
			       error_code = CASE WHEN t.status = 'TIMEOUT' THEN 'timeout' END
			FROM t WHERE r.task_id = t.id AND r.attempt = t.attempt AND r.finished_at IS NULL
		), lg AS (
			INSERT INTO task_logs (task_id, attempt, level, message, code, params)
			SELECT id, attempt, CASE WHEN status = 'CANCELLED' THEN 'info' ELSE 'error' END,
			       CASE WHEN status = 'CANCELLED' THEN 'cancelled as requested; its worker had stopped reporting'
			            ELSE 'timed out: no heartbeat for ' || timeout_seconds || 's' END,
			       CASE WHEN status = 'CANCELLED' THEN 'log.cancelled_unreported' ELSE 'log.timed_out_stale' END,
			       CASE WHEN status = 'CANCELLED' THEN NULL ELSE jsonb_build_object('seconds', timeout_seconds::text) END
			FROM t
		), ev AS (
			` + insertEvents(eventName, `'cleanup'`, `t`) + `
		)
		SELECT ` + taskColumns + ` FROM t`

// paramsJSON is params as the jsonb text the statements take; "" (NULL) for none.
func paramsJSON(params msg.Params) string {
	if len(params) == 0 {
		return ""
	}
	b, err := json.Marshal(params)
	if err != nil {
		return ""
	}
	return string(b)
}
