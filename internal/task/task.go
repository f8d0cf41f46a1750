// Package task is the home of a task's rules: its statuses and what each allows, the rule
// that turns an attempt's counts into an outcome, and which tasks a manual retry may take.
// Every layer asks this package instead of keeping its own copy: the store writes what these
// rules decide, and the API, live events, page, CLI and webhooks show it.
package task

import (
	"slices"
	"strings"
)

// Status is a task's position in the state machine (docs/design.md).
type Status string

// Task statuses.
const (
	StatusPending        Status = "PENDING"
	StatusRunning        Status = "RUNNING"
	StatusRetryWait      Status = "RETRY_WAIT"
	StatusSuccess        Status = "SUCCESS"
	StatusPartialSuccess Status = "PARTIAL_SUCCESS"
	StatusFailed         Status = "FAILED"
	StatusTimeout        Status = "TIMEOUT"
	StatusCancelled      Status = "CANCELLED"
)

// AllStatuses lists every status, for validation of filters.
var AllStatuses = []Status{StatusPending, StatusRunning, StatusRetryWait, StatusSuccess, StatusPartialSuccess, StatusFailed, StatusTimeout, StatusCancelled}

// Terminal reports whether no transition leaves s (except a manual retry).
func (s Status) Terminal() bool {
	switch s {
	case StatusSuccess, StatusPartialSuccess, StatusFailed, StatusTimeout, StatusCancelled:
		return true
	}
	return false
}

// TerminalSQL is the Terminal statuses as a SQL list, for `status IN ` + TerminalSQL: the
// statements that pick finished tasks (retention, the archive, the stats, the wait estimate)
// pick exactly those.
const TerminalSQL = `('SUCCESS', 'PARTIAL_SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED')`

// Waiting reports whether s is runnable once due.
func (s Status) Waiting() bool { return s == StatusPending || s == StatusRetryWait }

// Retryable reports whether the retry API accepts a task in status s, whatever its error
// (see CanRetry for the whole rule).
func (s Status) Retryable() bool {
	return s == StatusFailed || s == StatusTimeout || s == StatusCancelled
}

// Succeeded reports whether s is an outcome whose work was done (its result counts).
func (s Status) Succeeded() bool { return s == StatusSuccess || s == StatusPartialSuccess }

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return slices.Contains(AllStatuses, s) }

// CodeAllRowsRejected is the error of a task that read every row and accepted none: it ran
// to the end, its error report says why each row was refused, and running it again would
// refuse them again.
const CodeAllRowsRejected = "all_rows_rejected"

// CanRetry reports whether the retry API takes a task in status with errorCode: only when a
// retry can change the outcome — a timed-out or cancelled task, or one that failed on faults
// (CauseFault). A task that failed on its input (bad parameters, a file with missing
// columns, every row rejected) would fail the same way: the user fixes the input and
// submits it anew.
func CanRetry(status Status, errorCode string) bool {
	return status.Retryable() && CauseOf(status, errorCode) != CauseBadInput
}

// CodeRetriesExhausted is the error of a task whose attempts met faults (a dependency down,
// a crash, a bug) until its retry budget ran out.
const CodeRetriesExhausted = "retries_exhausted"

// Cause says why a task ended, in the terms an operator is paged on: a fault or a timeout is
// the system's to fix; bad input is the submitter's (the task told them what to change), and
// a cancel was asked for. Metrics carry it, and the shipped alert rules fire on faults and
// timeouts only, so one user's bad files never page anyone.
type Cause string

// Causes of an ending.
const (
	CauseNone      Cause = "none" // the work was done: SUCCESS or PARTIAL_SUCCESS
	CauseBadInput  Cause = "bad_input"
	CauseFault     Cause = "fault"
	CauseTimeout   Cause = "timeout"
	CauseCancelled Cause = "cancelled"
)

// CauseOf is the cause of a task that ended in status with errorCode. A FAILED task failed on
// its input unless its retries ran out on faults: every other failure code (bad parameters, a
// damaged file, every row rejected) is decided by the input and would fail the same way again.
func CauseOf(status Status, errorCode string) Cause {
	switch status {
	case StatusFailed:
		if errorCode == CodeRetriesExhausted {
			return CauseFault
		}
		return CauseBadInput
	case StatusTimeout:
		return CauseTimeout
	case StatusCancelled:
		return CauseCancelled
	}
	return CauseNone
}

// Counts are the rows a task has handled: read, accepted and rejected.
type Counts struct {
	Total   int64 `json:"total"`
	Success int64 `json:"success"`
	Failed  int64 `json:"failed"`
}

// Outcome is how a task whose work ran to the end turned out, decided from its counts: every
// row accepted is SUCCESS, some rejected (or rows left unread, cut short by a limit) is
// PARTIAL_SUCCESS, and rows read with none accepted is FAILED with CodeAllRowsRejected.
// A task that counts no rows (a report) succeeds.
func Outcome(c Counts, cutShort bool) (Status, string) {
	switch {
	case c.Total > 0 && c.Success == 0 && c.Failed > 0:
		return StatusFailed, CodeAllRowsRejected
	case c.Failed > 0 || cutShort:
		return StatusPartialSuccess, ""
	}
	return StatusSuccess, ""
}

// Event names, one per kind of committed status change: the outbox rows, live status events
// and webhooks all carry these.
const (
	EventSubmitted         = "task.submitted"
	EventStarted           = "task.started"
	EventCancelRequested   = "task.cancel_requested"
	EventRetryScheduled    = "task.retry_scheduled"
	EventSucceeded         = "task.succeeded"
	EventPartiallySucceded = "task.partially_succeeded"
	EventFailed            = "task.failed"
	EventTimedOut          = "task.timed_out"
	EventCancelled         = "task.cancelled"
	EventRetried           = "task.retried"
)

// eventOf names the change that left a task in each status. RUNNING is the one status two
// changes lead to: a start, and a cancel asked of a running task.
var eventOf = map[Status]string{
	StatusPending: EventSubmitted, StatusRunning: EventStarted, StatusRetryWait: EventRetryScheduled,
	StatusSuccess: EventSucceeded, StatusPartialSuccess: EventPartiallySucceded, StatusFailed: EventFailed,
	StatusTimeout: EventTimedOut, StatusCancelled: EventCancelled,
}

// EventName is the event of a change that left a task in status (a manual retry, which also
// leaves it PENDING, is EventRetried and named where it happens).
func EventName(status Status, cancelRequested bool) string {
	if status == StatusRunning && cancelRequested {
		return EventCancelRequested
	}
	return eventOf[status]
}

// EventNameSQL is EventName as a SQL expression over a status and a cancel_requested column,
// so the statements that write the outbox name events from this table and no other.
func EventNameSQL(status, cancelRequested string) string {
	var b strings.Builder
	b.WriteString("CASE " + status)
	for _, st := range AllStatuses {
		then := "'" + eventOf[st] + "'"
		if st == StatusRunning {
			then = "CASE WHEN " + cancelRequested + " THEN '" + EventCancelRequested + "' ELSE " + then + " END"
		}
		b.WriteString(" WHEN '" + string(st) + "' THEN " + then)
	}
	b.WriteString(" END")
	return b.String()
}
