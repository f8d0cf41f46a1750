package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
)

// The per-process batchers group the hot writes of many concurrent attempts into one
// statement, one transaction and one fsync: the claims that arrive together, and the
// endings. Every row keeps its own fence, and every caller learns its own answer, so the
// rules are the single-row rules. A caller never returns before its row has committed: no
// task is acknowledged to asynq without its row.
//
// The grouping itself (by arrival, with an optional short wait) is internal/batch's.

// call is one caller's request to a batcher (in) and, once its batch is written, its answer.
type call[In, Out any] struct {
	in   In
	out  Out
	err  error
	done chan struct{}
}

// answer hands the caller its answer.
func (r *call[In, Out]) answer(out Out, err error) {
	r.out, r.err = out, err
	close(r.done)
}

// calls is what the batchers share: a caller waits for its own answer, flush writes a batch
// and answers every call in it.
type calls[In, Out any] struct {
	b *batch.Batcher[call[In, Out]]
}

func newCalls[In, Out any](cfg batch.Config, flush func(context.Context, []*call[In, Out])) calls[In, Out] {
	return calls[In, Out]{b: batch.New(cfg, flush)}
}

// do queues in with whatever other calls are in flight and waits for its answer.
func (c calls[In, Out]) do(ctx context.Context, in In) (Out, error) {
	r := &call[In, Out]{in: in, done: make(chan struct{})}
	if err := c.b.Submit(ctx, r, r.done); err != nil {
		var zero Out
		return zero, err
	}
	return r.out, r.err
}

// Close answers what is queued and stops.
func (c calls[In, Out]) Close() { c.b.Close() }

// Completer groups the endings of attempts (see the note above).
type Completer struct {
	store  *store.Store
	logger *slog.Logger
	calls[store.Ending, *store.Task]
}

type completion = call[store.Ending, *store.Task]

// NewCompleter starts a completer; Close stops it.
func NewCompleter(st *store.Store, cfg batch.Config, logger *slog.Logger) *Completer {
	c := &Completer{store: st, logger: logger}
	c.calls = newCalls(cfg, c.flush)
	return c
}

// End writes one attempt's ending with whatever others are ending now, and returns its row,
// or an error wrapping store.ErrFenced when the attempt no longer owns the task.
func (c *Completer) End(ctx context.Context, e store.Ending) (*store.Task, error) {
	return c.do(ctx, e)
}

func (c *Completer) flush(ctx context.Context, batch []*completion) {
	writeOrSplit(c.logger, "endings", batch, func(rs []*completion) error {
		endings := make([]store.Ending, len(rs))
		for i, r := range rs {
			endings[i] = r.in
		}
		ended, err := c.write(ctx, endings)
		if err != nil {
			return err
		}
		for _, r := range rs {
			c.answer(r, ended, nil)
		}
		return nil
	}, func(r *completion, err error) { c.answer(r, nil, err) })
}

// writeOrSplit writes a batch with write, which answers the requests it was given when it
// succeeds. When a batch of several fails as a whole, each request is written on its own, so
// one bad row cannot fail or hold back the others; a request whose own write fails is
// answered with fail.
func writeOrSplit[R any](logger *slog.Logger, what string, batch []*R, write func([]*R) error, fail func(*R, error)) {
	err := write(batch)
	switch {
	case err == nil:
	case len(batch) == 1:
		fail(batch[0], err)
	default:
		logger.Warn("batched "+what+" failed; writing them one by one", "batch", len(batch), "err", err)
		for _, r := range batch {
			if err := write([]*R{r}); err != nil {
				fail(r, err)
			}
		}
	}
}

// write runs one flush, retried once.
func (c *Completer) write(ctx context.Context, endings []store.Ending) (map[int64]*store.Task, error) {
	var err error
	for try := range 2 {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var ended map[int64]*store.Task
		ended, err = c.store.EndAttempts(wctx, endings)
		cancel()
		if err == nil {
			return ended, nil
		}
		if try == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil, err
}

func (c *Completer) answer(r *completion, ended map[int64]*store.Task, err error) {
	l := r.in.Lease
	switch t := ended[l.TaskID]; {
	case err != nil:
		r.answer(nil, fmt.Errorf("end %s: %w", l, err))
	case t != nil && t.Attempt == l.Attempt:
		r.answer(t, nil)
	default:
		r.answer(nil, fmt.Errorf("end %s: %w", l, store.ErrFenced))
	}
}

// ClaimBatcher groups the claims of one worker process (see the note above).
type ClaimBatcher struct {
	store         *store.Store
	worker        string
	takeoverAfter time.Duration
	calls[int64, store.ClaimResult]
}

type claimReq = call[int64, store.ClaimResult]

// NewClaimBatcher starts a claim batcher for worker; Close stops it.
func NewClaimBatcher(st *store.Store, worker string, takeoverAfter time.Duration, cfg batch.Config) *ClaimBatcher {
	c := &ClaimBatcher{store: st, worker: worker, takeoverAfter: takeoverAfter}
	c.calls = newCalls(cfg, c.flush)
	return c
}

// Claim claims one task with whatever other claims are in flight; the answer is exactly
// store.ClaimTask's.
func (c *ClaimBatcher) Claim(ctx context.Context, id int64) (*store.Claimed, error) {
	res, err := c.do(ctx, id)
	if err != nil {
		return nil, err
	}
	return res.Claimed, res.Err
}

func (c *ClaimBatcher) flush(ctx context.Context, batch []*claimReq) {
	// Two deliveries of one task in one batch: one claim, the other hears it is running.
	byID := map[int64][]*claimReq{}
	var ids []int64
	for _, r := range batch {
		if len(byID[r.in]) == 0 {
			ids = append(ids, r.in)
		}
		byID[r.in] = append(byID[r.in], r)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := c.store.ClaimTasks(cctx, ids, c.worker, c.takeoverAfter)
	cancel()
	for id, reqs := range byID {
		for i, r := range reqs {
			switch {
			case err != nil:
				r.answer(store.ClaimResult{}, err)
			case i == 0:
				r.answer(res[id], nil)
			default:
				r.answer(store.ClaimResult{Err: &store.NotClaimableError{ClaimOutcome: store.ClaimOutcome{Status: store.StatusRunning,
					Attempt: 0, RetryIn: c.takeoverAfter}}}, nil)
			}
		}
	}
}

// Creator groups the inserts of concurrent submits: the submits that arrive together are
// written in one statement, one transaction and one fsync (see the note above), each task
// with its own audit row, event and idempotency check. A submit still answers only after its
// row has committed.
type Creator struct {
	store  *store.Store
	logger *slog.Logger
	calls[[]store.NewTask, []store.Created]
}

type createReq = call[[]store.NewTask, []store.Created]

// NewCreator starts a creator; Close stops it.
func NewCreator(st *store.Store, cfg batch.Config, logger *slog.Logger) *Creator {
	c := &Creator{store: st, logger: logger}
	c.calls = newCalls(cfg, c.flush)
	return c
}

// Create inserts nts with whatever other submits are in flight; the answer is exactly
// store.CreateMany's. The tasks' audit rows name the audit of ctx.
func (c *Creator) Create(ctx context.Context, nts []store.NewTask) ([]store.Created, error) {
	if a := audit.FromContext(ctx); a != nil {
		for i := range nts {
			if nts[i].Audit == nil {
				nts[i].Audit = a
			}
		}
	}
	return c.do(ctx, nts)
}

func (c *Creator) flush(ctx context.Context, batch []*createReq) {
	writeOrSplit(c.logger, "submits", batch, func(rs []*createReq) error {
		var all []store.NewTask
		for _, r := range rs {
			all = append(all, r.in...)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		created, err := c.store.CreateMany(wctx, all)
		cancel()
		if err != nil {
			return err
		}
		for _, r := range rs {
			r.answer(created[:len(r.in)], nil)
			created = created[len(r.in):]
		}
		return nil
	}, func(r *createReq, err error) { r.answer(nil, err) })
}
