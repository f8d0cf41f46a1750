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
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
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
	// Status is the outcome of the finished work, decided by task.Outcome for work that
	// counts rows: SUCCESS (the default), PARTIAL_SUCCESS, or FAILED with ErrorCode and
	// ErrorMessage when the whole input was judged bad (the result, e.g. its error report,
	// is kept all the same).
	Status                  store.Status
	ErrorCode, ErrorMessage string
	// Counts, when set, are the task's final counts (an export's rows written); nil keeps
	// what its batches committed.
	Counts *task.Counts
	// Data is stored as the task's result (JSON), e.g. the result file and row count.
	Data any
	// ExpiresAt is when the result file stops being downloadable; nil for never.
	ExpiresAt *time.Time
	// ErrorParams are ErrorCode's catalogue params (internal/msg "error.<code>").
	ErrorParams msg.Params
	// Log is the task log line that says how the work went ("log.imported", …).
	Log msg.Message
	// Files are the storage keys of the files this result owns. If the result cannot be recorded (the
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
	TaskFinished(taskType string, status store.Status, cause task.Cause, took time.Duration)
	RowsProcessed(taskType string, success, failed int)
	AttemptStalled(taskType string)
}

// TypePolicy is the runtime's view of a task type's configuration.
type TypePolicy struct {
	MaxRetry   int
	RetryBase  time.Duration
	MaxRuntime time.Duration
	// StallAfter: an attempt that reports no progress and commits no batch for this long is
	// stopped and ends TIMEOUT. Zero disables the check.
	StallAfter time.Duration
	// MaxRunningPerOwner caps how many tasks of one owner run at once in the type's queue
	// (fair share); a task over the cap waits, spending no retry. Zero: no cap.
	MaxRunningPerOwner int
}

// RuntimeConfig tunes the runtime.
type RuntimeConfig struct {
	WorkerID          string
	HeartbeatInterval time.Duration
	TakeoverAfter     time.Duration
	ProgressInterval  time.Duration
	Types             map[string]TypePolicy
	// AbandonAfter is how long a stopped handler (stalled, or past its max runtime) gets to
	// return before the attempt is concluded without it. Default 5s.
	AbandonAfter time.Duration
}

// Runtime runs task handlers for asynq deliveries.
type Runtime struct {
	cfg      RuntimeConfig
	store    *store.Store
	enqueuer *Enqueuer
	retry    *Reenqueuer // optional
	board    *ProgressBoard
	files    storage.Store
	alerter  Alerter
	observer Observer
	logger   *slog.Logger
	handlers map[string]Handler
	beats    *heartbeater  // one heartbeat statement per interval for every running attempt
	claims   *ClaimBatcher // optional: claims grouped per flush
	complete *Completer    // optional: endings grouped per flush
	draining atomic.Bool
	inflight sync.WaitGroup // attempts between claim and their terminal write
}

// RuntimeDeps are the runtime's collaborators.
type RuntimeDeps struct {
	Store    *store.Store
	Enqueuer *Enqueuer
	Board    *ProgressBoard
	Files    storage.Store
	Alerter  Alerter  // optional
	Observer Observer // optional
	Logger   *slog.Logger
	// Claims and Completer, when set, group the process's claims and successful endings into
	// one statement per flush (see batcher.go); otherwise each is its own statement.
	Claims    *ClaimBatcher
	Completer *Completer
	// Reenqueuer, when set, tries a task whose enqueue for its next attempt failed again
	// every second; otherwise it waits for the cleanup round.
	Reenqueuer *Reenqueuer
}

// NewRuntime returns a runtime with no handlers registered.
func NewRuntime(cfg RuntimeConfig, d RuntimeDeps) *Runtime {
	if cfg.AbandonAfter <= 0 {
		cfg.AbandonAfter = 5 * time.Second
	}
	return &Runtime{cfg: cfg, store: d.Store, enqueuer: d.Enqueuer, retry: d.Reenqueuer, board: d.Board, files: d.Files,
		alerter: d.Alerter, observer: d.Observer, logger: d.Logger, handlers: map[string]Handler{}, claims: d.Claims, complete: d.Completer,
		beats: newHeartbeater(d.Store, cfg.HeartbeatInterval, d.Logger)}
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

// Close stops the runtime's heartbeat loop; call it after Wait.
func (rt *Runtime) Close() { rt.beats.close() }

// Wait blocks until every attempt this runtime started has written how it ended, or until
// timeout. asynq stops waiting for handlers after its shutdown timeout; without this the
// process could exit between a handler returning and its terminal write (an EndInterrupted cut off).
// It reports whether everything finished.
func (rt *Runtime) Wait(timeout time.Duration) bool { return within(timeout, rt.inflight.Wait) }

// within runs f and waits for it at most timeout (f goes on in the background after that),
// reporting whether it returned in time.
func within(timeout time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

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
	if rt.draining.Load() {
		return &retryAfterError{delay: time.Second, reason: "worker shutting down"}
	}
	rt.inflight.Add(1)
	defer rt.inflight.Done()
	claimed, err := rt.claim(ctx, p.TaskID, rt.cfg.Types[job.Type()].MaxRunningPerOwner)
	var (
		nc    *store.NotClaimableError
		ended *store.ClaimEndedError
	)
	switch {
	case errors.As(err, &ended):
		// The dead attempt's task was over by the rules (cancelled, or out of retries).
		logger.Warn("task ended instead of being taken over", "status", ended.Task.Status, "reason", ended.Task.ErrorMessage)
		if rt.observer != nil {
			rt.observer.TaskFinished(ended.Task.Type, ended.Task.Status, task.CauseOf(ended.Task.Status, ended.Task.ErrorCode), 0)
		}
		rt.removeTemp(ended.Task.TaskNo, 0, logger)
		rt.changed(ctx, ended.Task)
		if ended.Task.AlertDueAt != nil {
			rt.SendAlert(context.WithoutCancel(ctx), ended.Task.ID)
		}
		return nil
	case errors.As(err, &nc):
		if nc.OwnerAtCap {
			// Fair share: this owner has the queue's maximum running. Deliver again shortly;
			// the jitter keeps an owner's many deferred tasks from coming back all at once.
			return &retryAfterError{delay: time.Second + rand.N(2*time.Second), reason: nc.Error()}
		}
		if nc.Status == store.StatusRunning && nc.Attempt > p.Attempt {
			// A later delivery already started this task and it is alive. If its worker dies,
			// the cleanup round hands the task to asynq again; this copy is not needed.
			logger.Debug("delivery for a task another attempt is running", "attempt", nc.Attempt)
			return nil
		}
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

// claim claims the task: under the owner's cap when there is one, else through the claim
// batcher when there is one.
func (rt *Runtime) claim(ctx context.Context, id int64, maxRunning int) (*store.Claimed, error) {
	switch {
	case maxRunning > 0:
		return rt.store.ClaimTaskCapped(ctx, id, rt.cfg.WorkerID, rt.cfg.TakeoverAfter, maxRunning)
	case rt.claims != nil:
		return rt.claims.Claim(ctx, id)
	default:
		return rt.store.ClaimTask(ctx, id, rt.cfg.WorkerID, rt.cfg.TakeoverAfter)
	}
}

// outcome is what a handler returned.
type outcome struct {
	res Result
	err error
}

// policyOf is the policy that decides t's fate: the one fixed on its row at submit, so that
// a config change, or a replica with another config, cannot change what a submitted task gets.
// A row written before the policy columns existed takes the missing parts from configured.
func policyOf(t *store.Task, configured TypePolicy) TypePolicy {
	p := configured
	p.MaxRetry = t.MaxRetry
	ms := func(v *int64, d time.Duration) time.Duration {
		if v == nil {
			return d
		}
		return time.Duration(*v) * time.Millisecond
	}
	p.RetryBase = ms(t.RetryBaseMS, p.RetryBase)
	p.MaxRuntime = ms(t.MaxRuntimeMS, p.MaxRuntime)
	p.StallAfter = ms(t.StallAfterMS, p.StallAfter)
	return p
}

func (rt *Runtime) execute(ctx context.Context, h Handler, c *store.Claimed, logger *slog.Logger) error {
	policy := policyOf(c.Task, rt.cfg.Types[c.Task.Type])
	run := newRun(rt, c, logger)
	wctx := context.WithoutCancel(ctx)
	if c.Trigger == "takeover" || c.Trigger == "resume" || c.Trigger == "retry" {
		// Earlier attempts' partial files are dead: only this attempt writes from now on.
		rt.removeTemp(c.Task.TaskNo, c.Lease.Attempt, logger)
	}
	if c.Task.CancelRequested {
		// Cancelled while its previous attempt was dying: nothing to run.
		return rt.conclude(wctx, run, policy, Result{}, ErrCancelRequested, nil)
	}
	if rt.observer != nil {
		rt.observer.AttemptStarted(c.Task.Type, c.Trigger)
	}
	rt.changed(ctx, c.Task)
	logger.Debug("attempt started", "trigger", c.Trigger)

	hctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if policy.MaxRuntime > 0 {
		var stopTimer context.CancelFunc
		hctx, stopTimer = context.WithTimeoutCause(hctx, policy.MaxRuntime, errMaxRuntime)
		defer stopTimer()
	}
	beating := make(chan struct{})
	watchCtx, stopWatch := context.WithCancel(hctx)
	go func() {
		defer close(beating)
		rt.watch(watchCtx, run, policy, stop)
	}()
	done := make(chan outcome, 1)
	go func() {
		res, err := safeRun(hctx, h, run)
		done <- outcome{res, err}
	}()

	var out outcome
	select {
	case out = <-done:
	case <-hctx.Done():
		// Stopped (stall, max runtime, superseded, asynq withdrew the job). A handler that
		// honours its context returns at once; one blocked in a call that does not is left
		// behind after a grace period, and the attempt concludes without it.
		select {
		case out = <-done:
		case <-time.After(rt.cfg.AbandonAfter):
			out = outcome{err: fmt.Errorf("the handler did not return within %s of being stopped: %w", rt.cfg.AbandonAfter, context.Cause(hctx))}
			logger.Error("handler did not stop; abandoning it", "cause", context.Cause(hctx))
			go func() { rt.discard((<-done).res) }() // whatever it makes when it returns is void
		}
	}
	cause := context.Cause(hctx)
	stopWatch()
	<-beating
	return rt.conclude(wctx, run, policy, out.res, out.err, cause)
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

// watch keeps the attempt's heartbeat fresh (through the process's heartbeater, which also
// picks up cancel requests and stops a superseded attempt), and stops the handler when the
// attempt stalls: liveness follows progress, not a ticker, so a handler stuck in a call does
// not heartbeat for hours.
func (rt *Runtime) watch(ctx context.Context, run *Run, policy TypePolicy, stop context.CancelCauseFunc) {
	rt.beats.add(run, func() { stop(store.ErrFenced) })
	defer rt.beats.remove(run)
	t := time.NewTicker(rt.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if policy.StallAfter > 0 {
			if idle := run.idle(); idle > policy.StallAfter {
				run.Logger.Warn("attempt stalled: no progress", "idle", idle.Round(time.Second), "stall_after", policy.StallAfter)
				if rt.observer != nil {
					rt.observer.AttemptStalled(run.Task.Type)
				}
				// Stop heart-beating at once: if the handler cannot be stopped, the task still
				// goes to a takeover or TIMEOUT rather than looking alive.
				rt.beats.remove(run)
				stop(&stalledError{after: policy.StallAfter, where: run.position()})
				return
			}
		}
	}
}
