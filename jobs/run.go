package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/pg"
)

// Run is one attempt's handle on its task, given to Handler.Run. It carries the lease that
// fences every write, reports progress, and tells the handler when to stop.
type Run struct {
	// Task is the task row as the claim left it: params, checkpoint, counts.
	Task *store.Task
	// Lease fences this attempt's writes.
	Lease store.Lease
	// Trigger says how the attempt came about: first, retry, resume, takeover, manual_retry.
	Trigger string
	// Logger carries task_no, type, attempt and request_id on every line.
	Logger *slog.Logger

	rt              *Runtime
	cancelRequested atomic.Bool

	mu           sync.Mutex
	madeTemp     bool      // TempPrefix was asked for: the attempt may have scratch files
	lastBoardPut time.Time // zero until progress first reaches the board
	started      time.Time
	lastProgress time.Time // last progress report or committed batch
	current      int64     // progress at lastProgress
	total        int64
	counts       task.Counts // the task's counts as of its last committed batch
}

func newRun(rt *Runtime, c *store.Claimed, logger *slog.Logger) *Run {
	r := &Run{Task: c.Task, Lease: c.Lease, Trigger: c.Trigger, Logger: logger, rt: rt, started: time.Now()}
	r.lastProgress = r.started
	r.current, r.total = c.Task.ProgressCurrent, c.Task.ProgressTotal
	r.counts = task.Counts{Total: c.Task.TotalCount, Success: c.Task.SuccessCount, Failed: c.Task.FailedCount}
	r.cancelRequested.Store(c.Task.CancelRequested)
	return r
}

// TempPrefix is the prefix of this attempt's scratch files (storage.AttemptPrefix): takeovers
// and the task's end find and delete an attempt's leftovers by it. A handler names its scratch
// files with it; the end of a first attempt that never asked for it skips the search.
func (r *Run) TempPrefix() string {
	r.mu.Lock()
	r.madeTemp = true
	r.mu.Unlock()
	return storage.AttemptPrefix(r.Task.TaskNo, r.Lease.Attempt)
}

// mayHaveTemp reports whether some attempt of the task may have left scratch files here:
// this one asked for its prefix, or an earlier attempt existed.
func (r *Run) mayHaveTemp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.madeTemp || r.Trigger != "first"
}

// moved records that the attempt made progress: a progress report or a committed batch.
func (r *Run) moved(current, total int64) {
	r.mu.Lock()
	r.lastProgress = time.Now()
	r.current, r.total = current, total
	r.mu.Unlock()
}

// idle is how long the attempt has made no progress.
func (r *Run) idle() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Since(r.lastProgress)
}

// position says where the attempt is, for a stall message.
func (r *Run) position() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastProgress.Equal(r.started) {
		return fmt.Sprintf("it reported no progress since it started at %s", r.started.UTC().Format(time.RFC3339))
	}
	at := r.lastProgress.UTC().Format(time.RFC3339)
	if r.total > 0 {
		return fmt.Sprintf("its last progress was %d of %d at %s", r.current, r.total, at)
	}
	return fmt.Sprintf("its last progress was %d at %s", r.current, at)
}

// Params decodes the task's parameters into v.
func (r *Run) Params(v any) error {
	if len(r.Task.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Task.Params, v); err != nil {
		return BadInput("bad_params", "task parameters are not valid: %v", err)
	}
	return nil
}

// Checkpoint is the batch boundary check: it returns ErrCancelRequested or ErrDraining when
// the attempt should stop now, or the context's error.
func (r *Run) Checkpoint(ctx context.Context) error {
	switch {
	case r.cancelRequested.Load():
		return ErrCancelRequested
	case r.rt.draining.Load():
		return ErrDraining
	}
	return ctx.Err()
}

// Progress records progress: in the database (with a heartbeat) on every call, which handlers
// make once per batch, and on the Redis board at most every progress interval. It then does
// the Checkpoint check.
//
// A write that runs out of time (a lock timeout on a task row someone else holds, or a
// statement timeout) is skipped rather than ending the attempt: a progress report is worth
// less than the work behind it, and the attempt stays fenced all the same, by the next
// progress write, batch commit or heartbeat. The attempt still counts as moving.
func (r *Run) Progress(ctx context.Context, current, total int64) error {
	req, err := r.rt.store.Progress(ctx, r.Lease, current, total)
	switch {
	case err == nil:
		r.observeCancel(req)
		r.putBoard(ctx, current, total)
	case ctx.Err() == nil && pg.IsTimeout(err):
		r.Logger.Warn("progress not recorded: the database did not answer in time", "err", err)
	default:
		return err
	}
	r.moved(current, total)
	return r.Checkpoint(ctx)
}

// CommitBatch writes one batch in a transaction together with its checkpoint, counts,
// progress and heartbeat, fenced by the lease (see store.CommitBatch), then does the
// Checkpoint check.
func (r *Run) CommitBatch(ctx context.Context, write func(ctx context.Context, tx bun.Tx) (store.Batch, error)) error {
	var committed store.Batch
	req, err := r.rt.store.CommitBatch(ctx, r.Lease, func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
		b, err := write(ctx, tx)
		committed = b
		return b, err
	})
	if err != nil {
		return err
	}
	if r.rt.observer != nil {
		r.rt.observer.RowsProcessed(r.Task.Type, int(committed.SuccessDelta), int(committed.FailedDelta))
	}
	r.observeCancel(req)
	r.mu.Lock()
	r.counts.Total += committed.TotalDelta
	r.counts.Success += committed.SuccessDelta
	r.counts.Failed += committed.FailedDelta
	r.mu.Unlock()
	r.moved(committed.ProgressCurrent, committed.ProgressTotal)
	r.putBoard(ctx, committed.ProgressCurrent, committed.ProgressTotal)
	return r.Checkpoint(ctx)
}

// Log appends a line to the task's narrative (shown in its detail view) and to the process
// log. The line is fenced like every write of the attempt: a superseded attempt's line only
// reaches the process log.
func (r *Run) Log(ctx context.Context, level slog.Level, m msg.Message) {
	r.Logger.Log(ctx, level, m.English())
	if err := r.rt.store.AppendLog(ctx, r.Lease, levelName(level), m); err != nil {
		r.Logger.Debug("task log line not written", "err", err)
	}
}

func (r *Run) observeCancel(requested bool) {
	if requested {
		r.cancelRequested.Store(true)
	}
}

func (r *Run) putBoard(ctx context.Context, current, total int64) {
	r.mu.Lock()
	due := time.Since(r.lastBoardPut) >= r.rt.cfg.ProgressInterval
	if due {
		r.lastBoardPut = time.Now()
	}
	counts := r.counts
	r.mu.Unlock()
	if !due {
		return
	}
	if err := r.rt.board.Set(ctx, r.Lease.TaskNo, r.Task.Owner, current, total, counts); err != nil {
		// Progress in Redis is a convenience; the database copy is authoritative.
		r.Logger.Debug("progress board unavailable", "err", err)
	}
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	default:
		return "info"
	}
}
