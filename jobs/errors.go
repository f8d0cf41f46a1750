package jobs

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskcenter/taskcenter/internal/msg"
)

// BadInputError marks a failure the task's input causes: retrying cannot help, so the task
// goes to FAILED at once and asynq does not retry it.
type BadInputError struct {
	// Code is a stable machine-readable reason, e.g. "missing_columns".
	Code string
	// Message is written for the person who submitted the task, in English.
	Message string
	// Params are Code's catalogue params (internal/msg "error.<code>"), so the message reads
	// in the submitter's language too.
	Params msg.Params
}

func (e *BadInputError) Error() string { return e.Message }

// BadInputSaid returns a BadInputError said by the catalogue: "error.<code>" with params,
// its English text the message.
func BadInputSaid(code string, params msg.Params) error {
	return &BadInputError{Code: code, Params: params, Message: msg.Render(msg.EN, "error."+code, params)}
}

// BadInput returns a BadInputError.
func BadInput(code, format string, args ...any) error {
	return &BadInputError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Stop reasons a handler returns from Run.Checkpoint at a batch boundary.
var (
	// ErrCancelRequested: the user cancelled; the attempt ends CANCELLED.
	ErrCancelRequested = errors.New("cancel requested")
	// ErrDraining: this worker is shutting down; the attempt hands the task back to resume.
	ErrDraining = errors.New("worker shutting down")
	// errMaxRuntime: the attempt ran past its type's max runtime; it ends TIMEOUT.
	errMaxRuntime = errors.New("max runtime exceeded")
)

// stalledError stops an attempt that made no progress for too long.
type stalledError struct {
	after time.Duration
	where string
}

func (e *stalledError) Error() string {
	return fmt.Sprintf("the task stalled: no progress for %s (%s); it was stopped and can be retried", e.after, e.where)
}

// retryAfterError asks asynq to deliver the job again after a set delay without counting a
// failure: the task is running elsewhere, or not yet due.
type retryAfterError struct {
	delay  time.Duration
	reason string
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("%s; deliver again in %s", e.reason, e.delay.Round(time.Millisecond))
}

// Backoff returns the delay before automatic retry n (1-based): base·2^(n−1) plus a random
// jitter in [0, base), capped at an hour.
func Backoff(base time.Duration, n int) time.Duration {
	if base <= 0 {
		base = time.Second
	}
	d := base << min(max(n-1, 0), 20)
	if d <= 0 || d > time.Hour {
		d = time.Hour
	}
	return d + rand.N(base)
}

// describe turns a transient error into words fit for the task's error_message, which users
// read: the kind of fault, never SQL or stack text. The full error goes to the process log.
func describe(err error) string {
	var pgErr *pgconn.PgError
	var netErr net.Error
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "a temporary error interrupted the task: an operation timed out"
	case errors.As(err, &pgErr):
		return fmt.Sprintf("a temporary database error interrupted the task (SQLSTATE %s)", pgErr.Code)
	case errors.As(err, &netErr), errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF):
		return "a temporary error interrupted the task: a connection to a dependency failed"
	case errors.As(err, &pathErr):
		return "a temporary error interrupted the task: a file could not be " + pathOp(pathErr.Op)
	default:
		return "a temporary error interrupted the task"
	}
}

func pathOp(op string) string {
	switch op {
	case "open":
		return "opened"
	case "write":
		return "written"
	case "read":
		return "read"
	default:
		return "accessed"
	}
}
