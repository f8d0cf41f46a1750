package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
)

// payload is the asynq job body. The task row holds everything else: the job only says which
// task to claim.
type payload struct {
	TaskID    int64  `json:"task_id"`
	TaskNo    string `json:"task_no"`
	Attempt   int    `json:"attempt"`
	RequestID string `json:"request_id,omitempty"`
}

// JobID is the asynq TaskID for a task waiting under attempt number attempt (its form is
// task.JobID's, which also reads it back). Every claim raises the number, so the id names one
// "waiting to run" episode and enqueueing it again is a no-op while its job waits. One
// exception: a task cancelled before any claim and then retried waits again under the same
// number (see EnqueueNew for how that is handled).
func JobID(taskNo string, attempt int) string { return task.JobID(taskNo, attempt) }

// Lanes of a queue. A task waits in one of four asynq queues behind its queue, and workers
// take from them in this order:
//   - resume: a task that has run before (taken over from a dead worker, resumed after a
//     shutdown, retried after a transient fault): work already under way finishes before new
//     work starts, however long the backlog;
//   - high: priority 1-3;
//   - the queue itself: priority 4-6 (the default, 5);
//   - low: priority 7-9.
//
// Priorities run from 1 (first) to 9 (last), as in the seed design: smaller runs first.
const (
	resumeLaneSuffix = ".resume"
	highLaneSuffix   = ".high"
	lowLaneSuffix    = ".low"
)

// Priority bounds and the default.
const (
	PriorityHighest = 1
	PriorityDefault = 5
	PriorityLowest  = 9
)

// PriorityProblem says what is wrong with a priority a client asked for (0 asks for the
// type's default), with bad true (false when nothing is): a submit's and a schedule's.
func PriorityProblem(priority int) (m msg.Message, bad bool) {
	if priority == 0 || (priority >= PriorityHighest && priority <= PriorityLowest) {
		return msg.Message{}, false
	}
	return msg.New("field_error.priority", "first", strconv.Itoa(PriorityHighest), "last", strconv.Itoa(PriorityLowest)), true
}

// Lane is the asynq queue a task waits in (see Lanes).
func Lane(t *store.Task) string {
	switch {
	case t.Attempt > 0:
		return t.Queue + resumeLaneSuffix
	case t.Priority >= PriorityHighest && t.Priority <= 3:
		return t.Queue + highLaneSuffix
	case t.Priority >= 7:
		return t.Queue + lowLaneSuffix
	default:
		return t.Queue
	}
}

// Lanes lists the asynq queues behind a queue, in the order workers take from them.
func Lanes(queue string) []string {
	return []string{queue + resumeLaneSuffix, queue + highLaneSuffix, queue, queue + lowLaneSuffix}
}

// LaneWeights are the asynq queue priorities of a queue's lanes: with strict priority a lane
// is served only when the lanes before it are empty; otherwise lanes are picked at random in
// proportion to these weights (resume 8, high 4, normal 2, low 1), so low priority work is
// slowed but never starved.
func LaneWeights(queue string) map[string]int {
	out := map[string]int{}
	for i, lane := range Lanes(queue) {
		out[lane] = 8 >> i
	}
	return out
}

// asynqMaxRetry bounds asynq's own redeliveries of one job. Our retries are decided by the
// task row; asynq retries only infrastructure failures (Postgres down at claim time).
const asynqMaxRetry = 25

// Enqueuer hands waiting tasks to asynq.
type Enqueuer struct {
	client    *asynq.Client
	inspector *asynq.Inspector
	runtimes  map[string]time.Duration // task type → max runtime
}

// NewEnqueuer returns an Enqueuer. maxRuntime gives each type's attempt limit, which becomes
// the asynq job timeout (plus slack, so our own limit fires first).
func NewEnqueuer(client *asynq.Client, inspector *asynq.Inspector, maxRuntime map[string]time.Duration) *Enqueuer {
	return &Enqueuer{client: client, inspector: inspector, runtimes: maxRuntime}
}

// Enqueue hands a PENDING or RETRY_WAIT task to asynq, to run at its next_retry_at, or a
// silent RUNNING task, to be taken over. It is idempotent: when asynq already holds a live
// job for this episode (the task at this attempt number) it does nothing.
func (e *Enqueuer) Enqueue(ctx context.Context, t *store.Task) error {
	_, err := e.EnqueueNew(ctx, t)
	return err
}

// EnqueueNew is Enqueue, and reports whether a job was created (false: asynq already held a
// live one for this episode).
func (e *Enqueuer) EnqueueNew(ctx context.Context, t *store.Task) (bool, error) {
	id := JobID(t.TaskNo, t.Attempt)
	lane := Lane(t)
	body, err := json.Marshal(payload{TaskID: t.ID, TaskNo: t.TaskNo, Attempt: t.Attempt, RequestID: t.RequestID})
	if err != nil {
		return false, err
	}
	maxRuntime := e.runtimes[t.Type]
	if maxRuntime <= 0 {
		maxRuntime = config.DefaultType(t.Queue).MaxRuntime
	}
	opts := []asynq.Option{asynq.Queue(lane), asynq.MaxRetry(asynqMaxRetry), asynq.Timeout(maxRuntime + time.Minute)}
	if t.NextRetryAt != nil && time.Until(*t.NextRetryAt) > 0 {
		opts = append(opts, asynq.ProcessAt(*t.NextRetryAt))
	}
	job := asynq.NewTask(t.Type, body)
	enqueue := func(jobID string) error {
		_, err := e.client.EnqueueContext(ctx, job, append(opts, asynq.TaskID(jobID))...)
		return err
	}
	for try := 0; ; try++ {
		err := enqueue(id)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, fmt.Errorf("enqueue %s: %w", id, err)
		}
		// The id is taken. What holds it decides.
		info, err := e.inspector.GetTaskInfo(lane, id)
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound) && try == 0:
			continue // it ended between the two calls: the id is free again
		case err != nil || info.State == asynq.TaskStateActive:
			// A delivery of this episode is in its handler, and it may have read the task
			// before the change this enqueue follows: a task cancelled while never claimed, then
			// retried, is PENDING again at the same attempt number, and the delivery that found
			// it CANCELLED ends without claiming it. Or asynq cannot say what holds the id (after
			// a FLUSHALL its queue list may be gone while a job survives). Either way a second
			// job (its own id) makes sure one delivery comes after the change; the claim lets at
			// most one of them run the task, and the other finds nothing to do.
			again := fmt.Sprintf("%s-again-%s", id, strconv.FormatInt(time.Now().UnixNano(), 36))
			if err := enqueue(again); err != nil {
				return false, fmt.Errorf("enqueue %s: %w", again, err)
			}
			return true, nil
		case info.State == asynq.TaskStateArchived || info.State == asynq.TaskStateCompleted:
			// An archived or retained job never runs again: replace it.
			if err := e.inspector.DeleteTask(lane, id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
				return false, fmt.Errorf("replace archived job %s: %w", id, err)
			}
			if err := enqueue(id); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
				return false, fmt.Errorf("enqueue %s: %w", id, err)
			}
			return true, nil
		default:
			// Pending, scheduled or waiting to be retried: a live job that has not been
			// delivered yet, so it will read the task as it is now.
			return false, nil
		}
	}
}

// Withdraw deletes the waiting job of a task cancelled while PENDING or RETRY_WAIT, so it does
// not sit in the queue. A job already delivered finds the task CANCELLED and does nothing.
func (e *Enqueuer) Withdraw(queue, taskNo string, attempt int) error {
	for _, lane := range Lanes(queue) {
		err := e.inspector.DeleteTask(lane, JobID(taskNo, attempt))
		if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
			return fmt.Errorf("withdraw job of %s: %w", taskNo, err)
		}
	}
	return nil
}
