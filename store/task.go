package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
)

// Status is a task's status; the rules live in internal/task.
type Status = task.Status

// Task statuses (see internal/task).
const (
	StatusPending        = task.StatusPending
	StatusRunning        = task.StatusRunning
	StatusRetryWait      = task.StatusRetryWait
	StatusSuccess        = task.StatusSuccess
	StatusPartialSuccess = task.StatusPartialSuccess
	StatusFailed         = task.StatusFailed
	StatusTimeout        = task.StatusTimeout
	StatusCancelled      = task.StatusCancelled
)

// Task is one row of the tasks table.
type Task struct {
	bun.BaseModel `bun:"table:tasks"`

	ID              int64           `bun:"id,pk,autoincrement"`
	TaskNo          string          `bun:"task_no"`
	Type            string          `bun:"type"`
	Title           string          `bun:"title"` // in English
	TitleCode       string          `bun:"title_code,nullzero"`
	TitleParams     msg.Params      `bun:"title_params,type:jsonb,nullzero"` // title_code's catalogue params
	Owner           string          `bun:"owner"`
	Queue           string          `bun:"queue"`
	Priority        int             `bun:"priority"`
	BizKey          *string         `bun:"biz_key"`
	Status          Status          `bun:"status"`
	Params          json.RawMessage `bun:"params,type:jsonb"`
	RequestID       string          `bun:"request_id,nullzero"`
	ProgressCurrent int64           `bun:"progress_current"`
	ProgressTotal   int64           `bun:"progress_total"`
	TotalCount      int64           `bun:"total_count"`
	SuccessCount    int64           `bun:"success_count"`
	FailedCount     int64           `bun:"failed_count"`
	Checkpoint      json.RawMessage `bun:"checkpoint,type:jsonb,nullzero"`
	Attempt         int             `bun:"attempt"`
	RetryCount      int             `bun:"retry_count"`
	MaxRetry        int             `bun:"max_retry"`
	NextRetryAt     *time.Time      `bun:"next_retry_at"`
	HeartbeatAt     *time.Time      `bun:"heartbeat_at"`
	Worker          string          `bun:"worker,nullzero"`
	CancelRequested bool            `bun:"cancel_requested"`
	ErrorCode       string          `bun:"error_code,nullzero"`
	ErrorMessage    string          `bun:"error_message,nullzero"`
	ErrorParams     msg.Params      `bun:"error_params,type:jsonb,nullzero"` // error_code's catalogue params
	Result          json.RawMessage `bun:"result,type:jsonb,nullzero"`
	ResultExpiresAt *time.Time      `bun:"result_expires_at"`
	TimeoutSeconds  int             `bun:"timeout_seconds"`
	// The rest of the policy fixed at submit (NULL on rows older than the columns).
	RetryBaseMS  *int64     `bun:"retry_base_ms"`
	MaxRuntimeMS *int64     `bun:"max_runtime_ms"`
	StallAfterMS *int64     `bun:"stall_after_ms"`
	EnqueuedAt   *time.Time `bun:"enqueued_at"`
	AlertDueAt   *time.Time `bun:"alert_due_at"`
	AlertedAt    *time.Time `bun:"alerted_at"`
	CreatedAt    time.Time  `bun:"created_at,nullzero,notnull,default:now()"`
	StartedAt    *time.Time `bun:"started_at"`
	FinishedAt   *time.Time `bun:"finished_at"`
	UpdatedAt    time.Time  `bun:"updated_at,nullzero,notnull,default:now()"`
}

// TitleMessage is the title the product gave the task as a catalogue message, nil when the
// title is the submitter's own (or was stored before titles were kept as messages).
func (t *Task) TitleMessage() *msg.Message {
	if t.TitleCode == "" {
		return nil
	}
	return &msg.Message{Code: t.TitleCode, Params: t.TitleParams}
}

// Run is one execution attempt of a task.
type Run struct {
	bun.BaseModel `bun:"table:task_runs"`

	ID      int64  `bun:"id,pk,autoincrement"`
	TaskID  int64  `bun:"task_id"`
	Attempt int    `bun:"attempt"`
	Trigger string `bun:"trigger"`
	Worker  string `bun:"worker"`
	Status  string `bun:"status"`
	Error   string `bun:"error,nullzero"`
	// ErrorCode and ErrorParams are Error as a catalogue message ("error.<code>"); empty on
	// runs written before they existed.
	ErrorCode   string     `bun:"error_code,nullzero"`
	ErrorParams msg.Params `bun:"error_params,type:jsonb,nullzero"`
	StartedAt   time.Time  `bun:"started_at"`
	FinishedAt  *time.Time `bun:"finished_at"`
}

// LogEntry is one line of a task's narrative.
type LogEntry struct {
	bun.BaseModel `bun:"table:task_logs"`

	ID      int64  `bun:"id,pk,autoincrement"`
	TaskID  int64  `bun:"task_id"`
	Attempt int    `bun:"attempt"`
	Level   string `bun:"level"`
	Message string `bun:"message"` // in English
	// Code and Params are the line as a catalogue message (internal/msg); empty on lines
	// written before they existed, which have only Message.
	Code      string     `bun:"code,nullzero"`
	Params    msg.Params `bun:"params,type:jsonb,nullzero"`
	CreatedAt time.Time  `bun:"created_at,nullzero,notnull,default:now()"`
}

// Event is one committed status change of a task, from the transactional outbox.
type Event struct {
	bun.BaseModel `bun:"table:task_events"`

	ID        int64     `bun:"id,pk,autoincrement"`
	TaskID    int64     `bun:"task_id"`
	TaskNo    string    `bun:"task_no"`
	Owner     string    `bun:"owner"`
	TaskType  string    `bun:"task_type"`
	Event     string    `bun:"event"`  // task.submitted, task.started, task.succeeded, ...
	Status    Status    `bun:"status"` // the task's status after the change
	Attempt   int       `bun:"attempt"`
	Actor     string    `bun:"actor"` // who caused it: a user, a worker, "cleanup"
	CreatedAt time.Time `bun:"created_at"`
}

// Event names (see internal/task).
const (
	EventSubmitted         = task.EventSubmitted
	EventStarted           = task.EventStarted
	EventCancelRequested   = task.EventCancelRequested
	EventRetryScheduled    = task.EventRetryScheduled
	EventSucceeded         = task.EventSucceeded
	EventPartiallySucceded = task.EventPartiallySucceded
	EventFailed            = task.EventFailed
	EventTimedOut          = task.EventTimedOut
	EventCancelled         = task.EventCancelled
	EventRetried           = task.EventRetried
)

// Lease identifies one running attempt. Every write of that attempt is fenced by it:
// once another worker takes the task over, the lease's writes change nothing.
type Lease struct {
	TaskID  int64
	TaskNo  string
	Attempt int
}

func (l Lease) String() string { return fmt.Sprintf("%s#%d", l.TaskNo, l.Attempt) }

// Scope is who is asking: a user sees their own tasks, an admin sees all. It lives in
// store/pg, so that the subpackages' listings bind the same one.
type Scope = pg.Scope

// Errors callers branch on.
var (
	// ErrNotFound: no such task, or not visible to the caller.
	ErrNotFound = errors.New("task not found")
	// ErrFenced: the attempt no longer owns the task (taken over, timed out or finished).
	ErrFenced = errors.New("attempt no longer owns the task")
)

// ConflictError reports a transition the state machine forbids from the task's status.
type ConflictError struct {
	Op     string
	Status Status
	// Reason, when set, says why a task in a status the operation usually takes is refused.
	Reason string
}

func (e *ConflictError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("cannot %s this task: %s", e.Op, e.Reason)
	}
	return fmt.Sprintf("cannot %s a task that is %s", e.Op, e.Status)
}
