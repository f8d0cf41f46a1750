package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
)

// conclude records how the attempt ended. ctx is not cancelled by shutdown: the terminal
// write must not be dropped. The SQL of every way out of RUNNING lets a requested cancel win
// (see store), so each branch looks at the status the write actually left.
func (rt *Runtime) conclude(ctx context.Context, run *Run, policy TypePolicy, res Result, runErr, cause error) error {
	var (
		bad     *BadInputError
		stalled *stalledError
	)
	if runErr != nil && !errors.As(runErr, &bad) && !errors.Is(runErr, ErrCancelRequested) && !errors.Is(runErr, ErrDraining) {
		if d := dataProblem(runErr); d != nil {
			bad = d // deterministic: the same input fails the same way every time
			runErr = d
		}
	}
	switch {
	case errors.Is(cause, store.ErrFenced) || errors.Is(runErr, store.ErrFenced):
		run.Logger.Warn("attempt was superseded; its work is discarded", "err", runErr)
		rt.discard(res)
		return nil
	case runErr == nil:
		data, err := json.Marshal(res.Data)
		if err == nil {
			return rt.endFinished(ctx, run, res, data)
		}
		runErr = fmt.Errorf("encode result: %w", err) // a transient fault, below
	case errors.Is(runErr, ErrCancelRequested):
		rt.endWith(ctx, run, "could not record cancellation", []store.Status{store.StatusCancelled},
			func(ctx context.Context) (*store.Task, error) { return rt.store.EndCancelled(ctx, run.Lease) })
		return nil
	case errors.As(cause, &stalled), errors.Is(cause, errMaxRuntime):
		msg := fmt.Sprintf("the attempt ran longer than the %s limit for %s", policy.MaxRuntime, run.Task.Type)
		if stalled != nil {
			msg = stalled.Error()
		}
		rt.endWith(ctx, run, "could not record timeout", []store.Status{store.StatusTimeout, store.StatusCancelled},
			func(ctx context.Context) (*store.Task, error) { return rt.store.EndTimedOut(ctx, run.Lease, msg) })
		return nil
	case errors.Is(runErr, ErrDraining), cause != nil:
		return rt.endInterrupted(ctx, run, errors.Is(runErr, ErrDraining))
	case bad != nil:
		// The task failed on its input, and says so to its submitter; for the queue the job is
		// done (no retry, no archived job, no "Retry exhausted" warning: nothing for an operator).
		rt.endWith(ctx, run, "could not record failure", []store.Status{store.StatusFailed, store.StatusCancelled},
			func(ctx context.Context) (*store.Task, error) {
				return rt.store.EndFailedWith(ctx, run.Lease, bad.Code, bad.Params, bad.Message)
			})
		return nil
	}
	return rt.endTransient(ctx, run, policy, runErr)
}

// endWith records an ending the attempt decided (persist) and announces it, reporting
// whether it was recorded; when not, it logs what it could not record (the task is taken
// over after the heartbeat window).
func (rt *Runtime) endWith(ctx context.Context, run *Run, failed string, want []store.Status,
	end func(context.Context) (*store.Task, error)) bool {
	task, err := rt.persist(ctx, run.Lease, want, end)
	if err != nil {
		run.Logger.Error(failed, "err", err)
		return false
	}
	rt.finished(ctx, run, task)
	return true
}

// endFinished records the work's outcome (SUCCESS, PARTIAL_SUCCESS, or FAILED when every
// row was rejected); a cancel that came after the work was done does not change it.
func (rt *Runtime) endFinished(ctx context.Context, run *Run, res Result, data json.RawMessage) error {
	l := run.Lease
	status := cmpStatus(res.Status, store.StatusSuccess)
	if run.cancelRequested.Load() {
		run.Log(ctx, slog.LevelInfo, msg.New("log.cancel_after_work"))
	}
	outcome := store.Outcome{Status: status, ErrorCode: res.ErrorCode, ErrorMessage: res.ErrorMessage, Counts: res.Counts,
		ErrorParams: res.ErrorParams, Result: data, ResultExpiresAt: res.ExpiresAt, Log: res.Log}
	ending := store.FinishedEnding(l, outcome)
	task, err := rt.persist(ctx, l, []store.Status{status}, func(ctx context.Context) (*store.Task, error) {
		if rt.complete != nil {
			return rt.complete.End(ctx, ending)
		}
		return rt.store.EndFinished(ctx, l, outcome)
	})
	if err != nil {
		run.Logger.Error("could not record success; the result is discarded", "err", err)
		rt.discard(res)
		return nil
	}
	rt.finished(ctx, run, task)
	return nil
}

// endInterrupted hands the task back without spending a retry (shutdown, or asynq withdrew
// the job: the lease was lost while Redis was unreachable); the next attempt resumes.
func (rt *Runtime) endInterrupted(ctx context.Context, run *Run, draining bool) error {
	reason := "interrupt.draining"
	if !draining {
		reason = "interrupt.lease_lost"
	}
	task, err := rt.persist(ctx, run.Lease, []store.Status{store.StatusRetryWait, store.StatusCancelled}, func(ctx context.Context) (*store.Task, error) {
		return rt.store.EndInterrupted(ctx, run.Lease, reason)
	})
	if err != nil {
		run.Logger.Error("could not hand the task back; it will be taken over after the heartbeat window", "err", err)
		return nil
	}
	if task.Status == store.StatusCancelled {
		rt.finished(ctx, run, task)
		return nil
	}
	run.Logger.Info("attempt interrupted; task handed back to resume", "reason", reason)
	rt.enqueue(ctx, task, run.Logger)
	return nil
}

// endTransient ends an attempt that met a transient fault: retry with back-off while the
// budget lasts; then fail and alert once.
func (rt *Runtime) endTransient(ctx context.Context, run *Run, policy TypePolicy, runErr error) error {
	l, log := run.Lease, run.Logger
	public := describe(runErr)
	if run.Task.RetryCount < policy.MaxRetry {
		delay := Backoff(policy.RetryBase, run.Task.RetryCount+1)
		log.Warn("attempt failed; will retry", "err", runErr, "retry", run.Task.RetryCount+1, "of", policy.MaxRetry, "in", delay)
		task, err := rt.persist(ctx, l, []store.Status{store.StatusRetryWait, store.StatusCancelled}, func(ctx context.Context) (*store.Task, error) {
			return rt.store.EndRetryWait(ctx, l, "transient", public, delay)
		})
		if err != nil {
			log.Error("could not schedule the retry; the task will be taken over after the heartbeat window", "err", err)
			return nil
		}
		if task.Status == store.StatusCancelled {
			rt.finished(ctx, run, task)
			return nil
		}
		rt.enqueue(ctx, task, log)
		return nil
	}
	log.Error("attempt failed and retries are used up", "err", runErr, "max_retry", policy.MaxRetry)
	msg := fmt.Sprintf("%s (gave up after %d retries)", public, policy.MaxRetry)
	task, err := rt.persist(ctx, l, []store.Status{store.StatusFailed, store.StatusCancelled}, func(ctx context.Context) (*store.Task, error) {
		return rt.store.EndGaveUp(ctx, l, task.CodeRetriesExhausted, msg)
	})
	if err != nil {
		log.Error("could not record failure", "err", err)
		return nil
	}
	rt.finished(ctx, run, task)
	if task.AlertDueAt != nil {
		rt.SendAlert(ctx, task.ID)
	}
	return fmt.Errorf("%s: %w", msg, asynq.SkipRetry)
}

// SendAlert sends the failure alert of a task whose retries ran out, if nobody has: the
// claim is recorded on the task row, so a task alerts exactly once however many processes
// try (the worker that failed it, or the cleanup round when that worker died first).
func (rt *Runtime) SendAlert(ctx context.Context, taskID int64) {
	task, err := rt.store.ClaimAlert(ctx, taskID)
	if err != nil {
		rt.logger.Warn("could not claim a failure alert; the cleanup round will send it", "task_id", taskID, "err", err)
		return
	}
	if task != nil && rt.alerter != nil {
		rt.alerter.TaskFailed(ctx, AlertOf(task))
	}
}

// AlertOf is the failure alert of a task.
func AlertOf(t *store.Task) Alert {
	return Alert{TaskNo: t.TaskNo, Type: t.Type, Owner: t.Owner, Attempts: t.Attempt, Message: t.ErrorMessage}
}

// finished is the common tail of a terminal write.
func (rt *Runtime) finished(ctx context.Context, run *Run, t *store.Task) {
	run.mu.Lock()
	onBoard := !run.lastBoardPut.IsZero()
	run.mu.Unlock()
	if onBoard || run.Trigger != "first" { // an earlier attempt may have left progress behind
		if err := rt.board.Clear(ctx, t.TaskNo); err != nil {
			run.Logger.Debug("could not clear progress board", "err", err)
		}
	}
	// Whatever partial files any attempt of this task left are dead now. (A first attempt
	// that never asked for a temp prefix has none: no need to scan the scratch directory.)
	if run.mayHaveTemp() {
		rt.removeTemp(t.TaskNo, 0, run.Logger)
	}
	rt.changed(ctx, t)
	var took time.Duration
	if t.StartedAt != nil && t.FinishedAt != nil {
		took = t.FinishedAt.Sub(*t.StartedAt)
	}
	if rt.observer != nil {
		rt.observer.TaskFinished(t.Type, t.Status, task.CauseOf(t.Status, t.ErrorCode), took)
	}
	run.Logger.Info("task finished", "status", string(t.Status), "took", took)
}

// removeTemp deletes the temp files of every attempt of a task but keep (0: all).
func (rt *Runtime) removeTemp(taskNo string, keep int, log *slog.Logger) {
	if rt.files == nil {
		return
	}
	if n, err := rt.files.RemoveAttemptTemp(taskNo, keep); err != nil {
		log.Warn("could not remove partial files of earlier attempts", "err", err)
	} else if n > 0 {
		log.Info("removed partial files of earlier attempts", "count", n)
	}
}

// changed announces a committed status change to live streams (best effort: they also poll).
func (rt *Runtime) changed(ctx context.Context, task *store.Task) {
	if rt.board == nil {
		return
	}
	if err := rt.board.Changed(context.WithoutCancel(ctx), task.TaskNo, task.Owner); err != nil {
		rt.logger.Debug("could not announce a status change", "task_no", task.TaskNo, "err", err)
	}
}

// enqueue hands a task that is waiting again to asynq. If Redis is unreachable the task stays
// committed, the Reenqueuer (when set) tries again every second, and the rescuer is the
// backstop.
func (rt *Runtime) enqueue(ctx context.Context, task *store.Task, log *slog.Logger) {
	rt.changed(ctx, task)
	ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rt.enqueuer.Enqueue(ectx, task); err != nil {
		log.Warn("could not enqueue; it is handed over when Redis answers again", "err", err)
		if rt.retry != nil {
			rt.retry.Add(task)
		}
		if err := rt.store.MarkEnqueueFailed(ctx, task.ID, task.Attempt); err != nil {
			log.Warn("could not flag the task for the rescuer", "err", err)
		}
	}
}

func (rt *Runtime) discard(res Result) {
	if rt.files == nil {
		return
	}
	for _, f := range res.Files {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := rt.files.Delete(ctx, f)
		cancel()
		if err != nil {
			rt.logger.Warn("could not remove a discarded result file", "file", f, "err", err)
		}
	}
}

// persist retries a terminal write through short database outages, for up to 30 seconds. A
// fenced write is final and is not retried. A commit whose reply was lost is ambiguous: when
// a retry comes back fenced, the row is read again, and if it shows this attempt's own
// ending (one of want, at the lease's attempt) the first commit landed and it is returned.
func (rt *Runtime) persist(ctx context.Context, l store.Lease, want []store.Status, write func(ctx context.Context) (*store.Task, error)) (*store.Task, error) {
	deadline := time.Now().Add(30 * time.Second)
	wait := 100 * time.Millisecond
	for try := 0; ; try++ {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		t, err := write(wctx)
		cancel()
		if err == nil {
			return t, nil
		}
		if errors.Is(err, store.ErrFenced) {
			if try == 0 {
				return nil, err
			}
			if row, rerr := rt.store.GetByID(ctx, l.TaskID); rerr == nil && row.Attempt == l.Attempt && slices.Contains(want, row.Status) {
				rt.logger.Info("an earlier try of the terminal write had committed", "task_no", l.TaskNo, "status", row.Status)
				return row, nil
			}
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(wait)
		wait = min(wait*2, 3*time.Second)
	}
}

// dataProblem recognises a Postgres data exception (SQLSTATE class 22: a value out of range,
// too long, malformed, with a NUL byte): the same input fails the same way on every try, so
// it is bad input, not a transient fault.
func dataProblem(err error) *BadInputError {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 || pgErr.Code[:2] != "22" {
		return nil
	}
	what := map[string]string{
		"22001": "a value is longer than the column allows",
		"22003": "a number is out of range",
		"22007": "a date or time is not valid",
		"22008": "a date or time is out of range",
		"22012": "a division by zero",
		"22021": "a value contains a byte that is not valid text (such as a NUL byte)",
		"22P02": "a value is not in the expected format",
		"22P05": "a value contains a character that cannot be stored",
	}[pgErr.Code]
	if what == "" {
		what = "a value could not be stored"
	}
	return &BadInputError{Code: "bad_data", Message: fmt.Sprintf("the task's data cannot be processed: %s (SQLSTATE %s)", what, pgErr.Code)}
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
