package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

// The per-process batchers group the hot writes of many concurrent attempts into one
// statement, one transaction and one fsync: the claims that arrive together, and the
// endings. Every row keeps its own fence, and every caller learns its own answer, so the
// rules are the single-row rules. A caller never returns before its row has committed: no
// task is acknowledged to asynq without its row.
//
// Batching is by arrival, with an optional short wait: a request that finds the batcher idle
// goes at once; requests arriving while a flush is in flight wait for the next one and go
// together. Idle, the latency is one round trip; busy, the cost per task falls with the
// batch size.

// BatchConfig tunes a batcher.
type BatchConfig struct {
	// MaxBatch caps one flush. Default 128.
	MaxBatch int
	// MaxWait is how long a request may wait for company, from when it was queued: a flush
	// whose first request has waited that long (behind the flush before) goes at once with
	// what is queued. Default 0: a flush takes what is queued and goes.
	MaxWait time.Duration
	// Queue is how many requests may wait for a flush. Default 4 × MaxBatch.
	Queue int
	// Observer, when set, hears of every flush (metrics).
	Observer BatchObserver
}

// BatchObserver hears how the grouped writes go: each flush's rows and duration, and how long
// each write waited from arrival to answer (what a submit, claim or ending actually waits).
// Implementations must be quick: they run on the flush loop.
type BatchObserver interface {
	Flushed(rows int, took time.Duration)
	Waited(wait time.Duration)
}

func (c BatchConfig) withDefaults() BatchConfig {
	if c.MaxBatch <= 0 {
		c.MaxBatch = 128
	}
	if c.Queue <= 0 {
		c.Queue = 4 * c.MaxBatch
	}
	return c
}

// batcher collects requests of type R and flushes them with flush, which must answer every
// request (fill its result) before returning.
type batcher[R any] struct {
	cfg   BatchConfig
	in    chan queued[R]
	flush func(ctx context.Context, batch []*R)
	stop  chan struct{}
	done  chan struct{}

	mu     sync.RWMutex
	closed bool

	flushes atomic.Int64 // for tests and metrics: how many flushes ran
}

// queued is a request and when it was queued.
type queued[R any] struct {
	r  *R
	at time.Time
}

func newBatcher[R any](cfg BatchConfig, flush func(context.Context, []*R)) *batcher[R] {
	cfg = cfg.withDefaults()
	b := &batcher[R]{cfg: cfg, in: make(chan queued[R], cfg.Queue), flush: flush, stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

func (b *batcher[R]) loop() {
	defer close(b.done)
	for {
		var first queued[R]
		select {
		case first = <-b.in:
		case <-b.stop:
			// No request can arrive any more (see close): answer what is queued and stop.
			for {
				select {
				case r := <-b.in:
					b.run(b.collect(r))
				default:
					return
				}
			}
		}
		b.flushes.Add(1)
		b.run(b.collect(first))
	}
}

// run flushes one batch and tells the observer how it went.
func (b *batcher[R]) run(batch []queued[R]) {
	rs := make([]*R, len(batch))
	for i, q := range batch {
		rs[i] = q.r
	}
	began := time.Now()
	b.flush(context.Background(), rs)
	if o := b.cfg.Observer; o != nil {
		done := time.Now()
		o.Flushed(len(rs), done.Sub(began))
		for _, q := range batch {
			o.Waited(done.Sub(q.at))
		}
	}
}

// collect takes what is queued behind first, waiting for more until first has waited
// MaxWait.
func (b *batcher[R]) collect(first queued[R]) []queued[R] {
	batch := []queued[R]{first}
	deadline := first.at.Add(b.cfg.MaxWait)
	for len(batch) < b.cfg.MaxBatch {
		select {
		case q := <-b.in:
			batch = append(batch, q)
			continue
		default:
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		timer := time.NewTimer(left)
		select {
		case q := <-b.in:
			timer.Stop()
			batch = append(batch, q)
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// submit queues r and waits until a flush answered it (closed done). Once queued, it waits
// whatever ctx says: the write may commit, and the caller must know how it went.
func (b *batcher[R]) submit(ctx context.Context, r *R, done <-chan struct{}) error {
	if err := b.queue(ctx, r); err != nil {
		return err
	}
	<-done
	return nil
}

// offer hands r to the next flush if the queue has room, without waiting for room or for the
// flush: errQueueFull when it has none.
func (b *batcher[R]) offer(r *R) error { return b.put(nil, r) }

// queue hands r to the next flush, waiting for room as long as ctx allows, not for the flush.
func (b *batcher[R]) queue(ctx context.Context, r *R) error { return b.put(ctx, r) }

var errQueueFull = errors.New("batch queue full")

// put queues r: with a nil ctx only if there is room now.
func (b *batcher[R]) put(ctx context.Context, r *R) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return errBatcherClosed
	}
	q := queued[R]{r: r}
	if b.cfg.MaxWait > 0 || b.cfg.Observer != nil {
		q.at = time.Now()
	}
	if ctx == nil {
		select {
		case b.in <- q:
			return nil
		default:
			return errQueueFull
		}
	}
	select {
	case b.in <- q:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close refuses new requests, answers the queued ones and stops the loop.
func (b *batcher[R]) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.done
		return
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	<-b.done
}

var errBatcherClosed = errors.New("batcher closed")

// Completer groups the endings of attempts (see the note above).
type Completer struct {
	store  *store.Store
	logger *slog.Logger
	b      *batcher[completion]
}

type completion struct {
	ending store.Ending
	task   *store.Task
	err    error
	done   chan struct{}
}

// NewCompleter starts a completer; Close stops it.
func NewCompleter(st *store.Store, cfg BatchConfig, logger *slog.Logger) *Completer {
	c := &Completer{store: st, logger: logger}
	c.b = newBatcher(cfg, c.flush)
	return c
}

// End writes one attempt's ending with whatever others are ending now, and returns its row,
// or an error wrapping store.ErrFenced when the attempt no longer owns the task.
func (c *Completer) End(ctx context.Context, e store.Ending) (*store.Task, error) {
	r := &completion{ending: e, done: make(chan struct{})}
	if err := c.b.submit(ctx, r, r.done); err != nil {
		return nil, err
	}
	return r.task, r.err
}

// Close answers what is queued and stops.
func (c *Completer) Close() { c.b.close() }

func (c *Completer) flush(ctx context.Context, batch []*completion) {
	writeOrSplit(c.logger, "endings", batch, func(rs []*completion) error {
		endings := make([]store.Ending, len(rs))
		for i, r := range rs {
			endings[i] = r.ending
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
	l := r.ending.Lease
	switch t := ended[l.TaskID]; {
	case err != nil:
		r.err = fmt.Errorf("end %s: %w", l, err)
	case t != nil && t.Attempt == l.Attempt:
		r.task = t
	default:
		r.err = fmt.Errorf("end %s: %w", l, store.ErrFenced)
	}
	close(r.done)
}

// ClaimBatcher groups the claims of one worker process (see the note above).
type ClaimBatcher struct {
	store         *store.Store
	worker        string
	takeoverAfter time.Duration
	b             *batcher[claimReq]
}

type claimReq struct {
	id   int64
	res  store.ClaimResult
	err  error
	done chan struct{}
}

// NewClaimBatcher starts a claim batcher for worker; Close stops it.
func NewClaimBatcher(st *store.Store, worker string, takeoverAfter time.Duration, cfg BatchConfig) *ClaimBatcher {
	c := &ClaimBatcher{store: st, worker: worker, takeoverAfter: takeoverAfter}
	c.b = newBatcher(cfg, c.flush)
	return c
}

// Claim claims one task with whatever other claims are in flight; the answer is exactly
// store.Claim's.
func (c *ClaimBatcher) Claim(ctx context.Context, id int64) (*store.Claimed, error) {
	r := &claimReq{id: id, done: make(chan struct{})}
	if err := c.b.submit(ctx, r, r.done); err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	return r.res.Claimed, r.res.Err
}

// Close answers what is queued and stops.
func (c *ClaimBatcher) Close() { c.b.close() }

func (c *ClaimBatcher) flush(ctx context.Context, batch []*claimReq) {
	// Two deliveries of one task in one batch: one claim, the other hears it is running.
	byID := map[int64][]*claimReq{}
	var ids []int64
	for _, r := range batch {
		if len(byID[r.id]) == 0 {
			ids = append(ids, r.id)
		}
		byID[r.id] = append(byID[r.id], r)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := c.store.ClaimMany(cctx, ids, c.worker, c.takeoverAfter)
	cancel()
	for id, reqs := range byID {
		for i, r := range reqs {
			switch {
			case err != nil:
				r.err = err
			case i == 0:
				r.res = res[id]
			default:
				r.res = store.ClaimResult{Err: &store.NotClaimableError{ClaimOutcome: store.ClaimOutcome{Status: store.StatusRunning,
					Attempt: 0, RetryIn: c.takeoverAfter}}}
			}
			close(r.done)
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
	b      *batcher[createReq]
}

type createReq struct {
	nts  []store.NewTask
	res  []store.Created
	err  error
	done chan struct{}
}

// NewCreator starts a creator; Close stops it.
func NewCreator(st *store.Store, cfg BatchConfig, logger *slog.Logger) *Creator {
	c := &Creator{store: st, logger: logger}
	c.b = newBatcher(cfg, c.flush)
	return c
}

// Create inserts nts with whatever other submits are in flight; the answer is exactly
// store.CreateMany's. The tasks' audit rows name the audit of ctx.
func (c *Creator) Create(ctx context.Context, nts []store.NewTask) ([]store.Created, error) {
	if a := store.AuditOf(ctx); a != nil {
		for i := range nts {
			if nts[i].Audit == nil {
				nts[i].Audit = a
			}
		}
	}
	r := &createReq{nts: nts, done: make(chan struct{})}
	if err := c.b.submit(ctx, r, r.done); err != nil {
		return nil, err
	}
	return r.res, r.err
}

// Close answers what is queued and stops.
func (c *Creator) Close() { c.b.close() }

func (c *Creator) flush(ctx context.Context, batch []*createReq) {
	writeOrSplit(c.logger, "submits", batch, func(rs []*createReq) error {
		var all []store.NewTask
		for _, r := range rs {
			all = append(all, r.nts...)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		created, err := c.store.CreateMany(wctx, all)
		cancel()
		if err != nil {
			return err
		}
		for _, r := range rs {
			r.res, created = created[:len(r.nts)], created[len(r.nts):]
			close(r.done)
		}
		return nil
	}, func(r *createReq, err error) {
		r.err = err
		close(r.done)
	})
}
