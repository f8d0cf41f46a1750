package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

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

// JobID is the asynq TaskID for a task waiting under attempt number attempt. A task is
// PENDING or RETRY_WAIT at most once per attempt number, and every claim raises the number,
// so the id names exactly one "waiting to run" episode: enqueueing it again is a no-op.
func JobID(taskNo string, attempt int) string {
	return fmt.Sprintf("%s-a%d", taskNo, attempt)
}

// Lanes of a queue. A task that has run before (taken over from a dead worker, resumed after a
// shutdown, retried after a transient fault) waits in its queue's resume lane, which workers
// drain strictly before the main lane: work already under way finishes before new work starts,
// however long the backlog of new tasks.
const resumeLaneSuffix = ".resume"

// Lane is the asynq queue a task waits in: its queue, or the queue's resume lane once the
// task has run before.
func Lane(t *store.Task) string {
	if t.Attempt > 0 {
		return t.Queue + resumeLaneSuffix
	}
	return t.Queue
}

// Lanes lists the asynq queues behind a queue, in the order workers take from them.
func Lanes(queue string) []string { return []string{queue + resumeLaneSuffix, queue} }

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
	id := JobID(t.TaskNo, t.Attempt)
	lane := Lane(t)
	body, err := json.Marshal(payload{TaskID: t.ID, TaskNo: t.TaskNo, Attempt: t.Attempt, RequestID: t.RequestID})
	if err != nil {
		return err
	}
	maxRuntime := e.runtimes[t.Type]
	if maxRuntime <= 0 {
		maxRuntime = 6 * time.Hour
	}
	opts := []asynq.Option{
		asynq.TaskID(id), asynq.Queue(lane), asynq.MaxRetry(asynqMaxRetry),
		asynq.Timeout(maxRuntime + time.Minute),
	}
	if t.NextRetryAt != nil && time.Until(*t.NextRetryAt) > 0 {
		opts = append(opts, asynq.ProcessAt(*t.NextRetryAt))
	}
	job := asynq.NewTask(t.Type, body)
	_, err = e.client.EnqueueContext(ctx, job, opts...)
	if !errors.Is(err, asynq.ErrTaskIDConflict) {
		if err != nil {
			return fmt.Errorf("enqueue %s: %w", id, err)
		}
		return nil
	}
	// The id is taken. A live job (pending, scheduled, retry, active) will claim the task when
	// delivered; an archived one never will, so replace it.
	info, err := e.inspector.GetTaskInfo(lane, id)
	if err != nil || (info.State != asynq.TaskStateArchived && info.State != asynq.TaskStateCompleted) {
		return nil
	}
	if err := e.inspector.DeleteTask(lane, id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		return fmt.Errorf("replace archived job %s: %w", id, err)
	}
	if _, err := e.client.EnqueueContext(ctx, job, opts...); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", id, err)
	}
	return nil
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
