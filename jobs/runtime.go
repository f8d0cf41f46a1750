// Package jobs is the runtime every task type shares: it claims the task row for an asynq
// delivery, heartbeats, reports progress, honours cancel and shutdown at batch boundaries,
// classifies failures (bad input fails at once, transient faults retry with back-off) and
// writes the terminal state exactly once. Task types live in sub-packages and implement
// Handler; adding one is a handler plus one Register line in cmd.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/store"
)

// Handler does the work of one task type.
type Handler interface {
	// Type is the task type, e.g. "export:customers".
	Type() string
	// Run executes one attempt. Return a BadInputError for input that can never succeed,
	// the error of run.Checkpoint/Progress/CommitBatch when told to stop, and any other error
	// for a transient fault, which is retried with back-off.
	Run(ctx context.Context, run *Run) (Result, error)
}

// Result is how a successful attempt ended.
type Result struct {
	// Status is SUCCESS (the default) or PARTIAL_SUCCESS.
	Status store.Status
	// Data is stored as the task's result (JSON), e.g. the result file and row count.
	Data any
	// ExpiresAt is when the result file stops being downloadable; nil for never.
	ExpiresAt *time.Time
	// Message goes to the task log.
	Message string
	// Files are data-dir files this result owns. If the result cannot be recorded (the
	// attempt was superseded), they are removed.
	Files []string
}

// Alert is sent once when a task fails for good after using up its retries.
type Alert struct {
	TaskNo   string
	Type     string
	Owner    string
	Attempts int
	Message  string
}

// Alerter delivers alerts. Implementations must not block for long.
type Alerter interface {
	TaskFailed(ctx context.Context, a Alert)
}

// Observer is told about attempts and outcomes, for metrics.
type Observer interface {
	TaskSubmitted(taskType string)
	AttemptStarted(taskType, trigger string)
	TaskFinished(taskType string, status store.Status, took time.Duration)
	RowsProcessed(taskType string, success, failed int)
}

// TypePolicy is the runtime's view of a task type's configuration.
type TypePolicy struct {
	MaxRetry   int
	RetryBase  time.Duration
	MaxRuntime time.Duration
}

// RuntimeConfig tunes the runtime.
type RuntimeConfig struct {
	WorkerID          string
	HeartbeatInterval time.Duration
	TakeoverAfter     time.Duration
	ProgressInterval  time.Duration
	Types             map[string]TypePolicy
}

// Runtime runs task handlers for asynq deliveries.
type Runtime struct {
	cfg      RuntimeConfig
	store    *store.Store
	enqueuer *Enqueuer
	board    *ProgressBoard
	files    *files.Store
	alerter  Alerter
	observer Observer
	logger   *slog.Logger
	handlers map[string]Handler
	draining atomic.Bool
}

// RuntimeDeps are the runtime's collaborators.
type RuntimeDeps struct {
	Store    *store.Store
	Enqueuer *Enqueuer
	Board    *ProgressBoard
	Files    *files.Store
	Alerter  Alerter  // optional
	Observer Observer // optional
	Logger   *slog.Logger
}

// NewRuntime returns a runtime with no handlers registered.
func NewRuntime(cfg RuntimeConfig, d RuntimeDeps) *Runtime {
	return &Runtime{cfg: cfg, store: d.Store, enqueuer: d.Enqueuer, board: d.Board, files: d.Files,
		alerter: d.Alerter, observer: d.Observer, logger: d.Logger, handlers: map[string]Handler{}}
}

// Register adds a handler. Registering a type twice, or a type with no policy, panics: both
// are wiring mistakes caught at start-up.
func (rt *Runtime) Register(h Handler) {
	if _, dup := rt.handlers[h.Type()]; dup {
		panic("jobs: type registered twice: " + h.Type())
	}
	if _, ok := rt.cfg.Types[h.Type()]; !ok {
		panic("jobs: no policy configured for type " + h.Type())
	}
	rt.handlers[h.Type()] = h
}

// Types lists the registered task types.
func (rt *Runtime) Types() []string {
	out := make([]string, 0, len(rt.handlers))
	for t := range rt.handlers {
		out = append(out, t)
	}
	return out
}

// Drain tells running attempts to stop at their next batch boundary and hand their task
// back; used on SIGTERM.
func (rt *Runtime) Drain() { rt.draining.Store(true) }

// ProcessTask implements asynq.Handler.
func (rt *Runtime) ProcessTask(ctx context.Context, job *asynq.Task) error {
	var p payload
	if err := json.Unmarshal(job.Payload(), &p); err != nil || p.TaskID == 0 {
		rt.logger.Error("dropping a job whose payload is unreadable", "type", job.Type(), "err", err)
		return fmt.Errorf("unreadable payload: %w", asynq.SkipRetry)
	}
	logger := rt.logger.With("task_no", p.TaskNo, "type", job.Type(), "request_id", p.RequestID)
	h, ok := rt.handlers[job.Type()]
	if !ok {
		logger.Error("no handler registered for this task type on this worker")
		return fmt.Errorf("no handler for %s: %w", job.Type(), asynq.SkipRetry)
	}
	claimed, err := rt.store.Claim(ctx, p.TaskID, rt.cfg.WorkerID, rt.cfg.TakeoverAfter)
	var nc *store.NotClaimableError
	switch {
	case errors.As(err, &nc):
		if nc.RetryIn > 0 {
			logger.Debug("task not claimable yet", "status", nc.Status, "retry_in", nc.RetryIn)
			return &retryAfterError{delay: nc.RetryIn, reason: nc.Error()}
		}
		logger.Debug("delivery for a task with nothing to run", "status", nc.Status)
		return nil
	case errors.Is(err, store.ErrNotFound):
		logger.Info("delivery for a task that no longer exists")
		return nil
	case err != nil:
		logger.Warn("claim failed; asynq will deliver again", "err", err)
		return err
	}
	return rt.execute(ctx, h, claimed, logger.With("attempt", claimed.Lease.Attempt))
}

func (rt *Runtime) execute(ctx context.Context, h Handler, c *store.Claimed, logger *slog.Logger) error {
	policy := rt.cfg.Types[c.Task.Type]
	run := &Run{Task: c.Task, Lease: c.Lease, Trigger: c.Trigger, Logger: logger, rt: rt}
	if c.Trigger == "takeover" && c.Task.RetryCount > policy.MaxRetry {
		// Each takeover spends a retry: a task whose workers keep dying ends here instead of
		// taking down worker after worker.
		return rt.conclude(context.WithoutCancel(ctx), run, policy, Result{}, errWorkersDied, nil)
	}
	run.cancelRequested.Store(c.Task.CancelRequested)
	if rt.observer != nil {
		rt.observer.AttemptStarted(c.Task.Type, c.Trigger)
	}
	logger.Debug("attempt started", "trigger", c.Trigger)

	ctx, stop := context.WithCancelCause(ctx)
	ctx, stopTimer := context.WithTimeoutCause(ctx, policy.MaxRuntime, errMaxRuntime)
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		rt.heartbeat(ctx, run, stop)
	}()
	res, runErr := safeRun(ctx, h, run)
	cause := context.Cause(ctx)
	stop(nil)
	stopTimer()
	<-beating
	return rt.conclude(context.WithoutCancel(ctx), run, policy, res, runErr, cause)
}

func safeRun(ctx context.Context, h Handler, run *Run) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			run.Logger.Error("handler panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h.Run(ctx, run)
}

// heartbeat keeps the attempt's heartbeat fresh and picks up cancel requests. When the
// attempt turns out to be superseded it stops the handler.
func (rt *Runtime) heartbeat(ctx context.Context, run *Run, stop context.CancelCauseFunc) {
	t := time.NewTicker(rt.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, rt.cfg.HeartbeatInterval)
		req, err := rt.store.Heartbeat(hctx, run.Lease)
		cancel()
		switch {
		case errors.Is(err, store.ErrFenced):
			run.Logger.Warn("attempt lost ownership of the task; stopping it")
			stop(store.ErrFenced)
			return
		case err != nil:
			run.Logger.Warn("heartbeat failed", "err", err)
		default:
			run.observeCancel(req)
		}
	}
}

// conclude records how the attempt ended. ctx is not cancelled by shutdown: the terminal
// write must not be dropped.
func (rt *Runtime) conclude(ctx context.Context, run *Run, policy TypePolicy, res Result, runErr, cause error) error {
	l := run.Lease
	log := run.Logger
	var bad *BadInputError
	switch {
	case errors.Is(cause, store.ErrFenced) || errors.Is(runErr, store.ErrFenced):
		log.Warn("attempt was superseded; its work is discarded", "err", runErr)
		rt.discard(res)
		return nil

	case runErr == nil:
		data, err := json.Marshal(res.Data)
		if err != nil {
			runErr = fmt.Errorf("encode result: %w", err)
			break
		}
		status := cmpStatus(res.Status, store.StatusSuccess)
		task, err := persist(ctx, func(ctx context.Context) (*store.Task, error) {
			return rt.store.Succeed(ctx, l, store.Outcome{Status: status, Result: data, ResultExpiresAt: res.ExpiresAt, Message: res.Message})
		})
		if err != nil {
			log.Error("could not record success; the result is discarded", "err", err)
			rt.discard(res)
			return nil
		}
		rt.finished(ctx, run, task)
		return nil

	case errors.Is(runErr, ErrCancelRequested):
		task, err := persist(ctx, func(ctx context.Context) (*store.Task, error) { return rt.store.Cancelled(ctx, l) })
		if err != nil {
			log.Error("could not record cancellation", "err", err)
			return nil
		}
		rt.finished(ctx, run, task)
		return nil

	case errors.Is(cause, errMaxRuntime):
		msg := fmt.Sprintf("the attempt ran longer than the %s limit for %s", policy.MaxRuntime, run.Task.Type)
		task, err := persist(ctx, func(ctx context.Context) (*store.Task, error) { return rt.store.TimedOut(ctx, l, msg) })
		if err != nil {
			log.Error("could not record timeout", "err", err)
			return nil
		}
		rt.finished(ctx, run, task)
		return nil

	case errors.Is(runErr, ErrDraining), cause != nil:
		// Shutdown, or asynq withdrew the job (lease lost while Redis was unreachable):
		// hand the task back without spending a retry; the next attempt resumes.
		reason := "worker shutting down"
		if !errors.Is(runErr, ErrDraining) {
			reason = "worker lost its queue lease"
		}
		task, err := persist(ctx, func(ctx context.Context) (*store.Task, error) { return rt.store.Release(ctx, l, reason) })
		if err != nil {
			log.Error("could not hand the task back; it will be taken over after the heartbeat window", "err", err)
			return nil
		}
		log.Info("attempt interrupted; task handed back to resume", "reason", reason)
		rt.enqueue(ctx, task, log)
		return nil

	case errors.As(runErr, &bad):
		task, err := persist(ctx, func(ctx context.Context) (*store.Task, error) { return rt.store.Fail(ctx, l, bad.Code, bad.Message) })
		if err != nil {
			log.Error("could not record failure", "err", err)
			return nil
		}
		rt.finished(ctx, run, task)
		return fmt.Errorf("%s: %w", bad.Message, asynq.SkipRetry)
	}

	// A transient fault. Retry with back-off while the budget lasts; then fail and alert once.
	public := describe(runErr)
	if run.Task.RetryCount < policy.MaxRetry && !errors.Is(runErr, errWorkersDied) {
		delay := Backoff(policy.RetryBase, run.Task.RetryCount+1)
		log.Warn("attempt failed; will retry", "err", runErr, "retry", run.Task.RetryCount+1, "of", policy.MaxRetry, "in", delay)
		task, err := persist(ctx, func(ctx context.Context) (*store.Task, error) {
			return rt.store.RetryLater(ctx, l, "transient", public, delay)
		})
		if err != nil {
			log.Error("could not schedule the retry; the task will be taken over after the heartbeat window", "err", err)
			return nil
		}
		rt.enqueue(ctx, task, log)
		return nil
	}
	log.Error("attempt failed and retries are used up", "err", runErr, "max_retry", policy.MaxRetry)
	msg := fmt.Sprintf("%s (gave up after %d retries)", public, policy.MaxRetry)
	if errors.Is(runErr, errWorkersDied) {
		msg = fmt.Sprintf("the worker running this task stopped responding %d times; giving up", run.Task.RetryCount)
	}
	task, err := persist(ctx, func(ctx context.Context) (*store.Task, error) {
		return rt.store.Fail(ctx, l, "retries_exhausted", msg)
	})
	if err != nil {
		log.Error("could not record failure", "err", err)
		return nil
	}
	rt.finished(ctx, run, task)
	if rt.alerter != nil {
		rt.alerter.TaskFailed(ctx, Alert{TaskNo: task.TaskNo, Type: task.Type, Owner: task.Owner, Attempts: task.Attempt, Message: msg})
	}
	return fmt.Errorf("%s: %w", msg, asynq.SkipRetry)
}

// finished is the common tail of a terminal write.
func (rt *Runtime) finished(ctx context.Context, run *Run, task *store.Task) {
	run.mu.Lock()
	onBoard := !run.lastBoardPut.IsZero()
	run.mu.Unlock()
	if onBoard || run.Trigger != "first" { // an earlier attempt may have left progress behind
		if err := rt.board.Clear(ctx, task.TaskNo); err != nil {
			run.Logger.Debug("could not clear progress board", "err", err)
		}
	}
	var took time.Duration
	if task.StartedAt != nil && task.FinishedAt != nil {
		took = task.FinishedAt.Sub(*task.StartedAt)
	}
	if rt.observer != nil {
		rt.observer.TaskFinished(task.Type, task.Status, took)
	}
	run.Logger.Info("task finished", "status", task.Status, "took", took)
}

// enqueue hands a task that is waiting again to asynq. If Redis is unreachable the task stays
// committed and the rescuer enqueues it later.
func (rt *Runtime) enqueue(ctx context.Context, task *store.Task, log *slog.Logger) {
	ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rt.enqueuer.Enqueue(ectx, task); err != nil {
		log.Warn("could not enqueue; the rescuer will", "err", err)
		if err := rt.store.MarkEnqueueFailed(ctx, task.ID, task.Attempt); err != nil {
			log.Warn("could not flag the task for the rescuer", "err", err)
		}
	}
}

func (rt *Runtime) discard(res Result) {
	for _, f := range res.Files {
		if err := rt.files.Remove(f); err != nil {
			rt.logger.Warn("could not remove a discarded result file", "file", f, "err", err)
		}
	}
}

// persist retries a terminal write through short database outages, for up to 30 seconds.
// A fenced write is final and is not retried.
func persist[T any](ctx context.Context, write func(ctx context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(30 * time.Second)
	wait := 100 * time.Millisecond
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := write(wctx)
		cancel()
		if err == nil || errors.Is(err, store.ErrFenced) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(wait)
		wait = min(wait*2, 3*time.Second)
	}
}

func cmpStatus(s, def store.Status) store.Status {
	if s == "" {
		return def
	}
	return s
}

// RetryDelay is the asynq RetryDelayFunc: a busy or not-yet-due task is delivered again when
// it can be claimed; a crashed worker's job (lease expired) comes back soon, to be taken over
// once its heartbeat is stale; infrastructure errors back off exponentially.
func RetryDelay(n int, err error, t *asynq.Task) time.Duration {
	var ra *retryAfterError
	switch {
	case errors.As(err, &ra):
		return ra.delay
	case errors.Is(err, asynq.ErrLeaseExpired):
		return 5 * time.Second
	}
	return Backoff(time.Second, n+1)
}

// IsFailure tells asynq whether an error counts against the job's retry budget: waiting for a
// busy task does not.
func IsFailure(err error) bool {
	var ra *retryAfterError
	return !errors.As(err, &ra)
}

// ResultFiles lists the data-dir files a task's result points to: the result file and the
// error report. Cleanup deletes them on expiry and retention.
func ResultFiles(t *store.Task) []string {
	var r struct {
		File        string `json:"file"`
		ErrorReport string `json:"error_report"`
	}
	if len(t.Result) == 0 || json.Unmarshal(t.Result, &r) != nil {
		return nil
	}
	var out []string
	for _, f := range []string{r.File, r.ErrorReport} {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
