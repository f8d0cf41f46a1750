package jobs

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/taskcenter/taskcenter/internal/every"
	"github.com/taskcenter/taskcenter/store"
)

// Reenqueuer retries the hand-offs to asynq this process could not make — Redis unreachable,
// or a master failing over — every ReenqueueInterval, so a task submitted (or set to wait for
// a retry) during the gap is enqueued as soon as Redis answers again, not at the next cleanup
// round.
//
// It keeps exactly-once the way every enqueue does: it holds only a task's id and attempt,
// reads the row again before each try and drops a task that is no longer waiting at that
// attempt (cancelled, or claimed after the cleanup round handed it over); and the job id is
// the task's waiting episode, so a job that did reach Redis (a reply lost in the outage, or
// the cleanup round first) is found and not enqueued twice. The claim lets one delivery run.
//
// It is memory only, and bounded: a task it cannot hold, or that its process takes down with
// it, is left to the cleanup round's orphan re-enqueue, which the failed enqueue flagged.
type Reenqueuer struct {
	store    *store.Store
	enqueuer *Enqueuer
	logger   *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	pending map[int64]int // task id → the attempt its enqueue failed at
}

// ReenqueueInterval is how often the failed hand-offs are tried again.
const ReenqueueInterval = time.Second

// reenqueueLimit caps the tasks held; the rest wait for the cleanup round.
const reenqueueLimit = 100_000

// reenqueueTimeout bounds one try: Redis answers in a millisecond when it is back.
const reenqueueTimeout = time.Second

// reenqueueParallel is how many tasks are handed over at once after an outage (concurrent
// enqueues share a pipeline, see ScriptPipeliner).
const reenqueueParallel = 32

// NewReenqueuer returns a Reenqueuer trying every interval (ReenqueueInterval when 0); Run
// runs it.
func NewReenqueuer(s *store.Store, e *Enqueuer, interval time.Duration, logger *slog.Logger) *Reenqueuer {
	if interval <= 0 {
		interval = ReenqueueInterval
	}
	return &Reenqueuer{store: s, enqueuer: e, logger: logger, interval: interval, pending: map[int64]int{}}
}

// Add holds a task whose enqueue failed, to be tried again at the next round.
func (r *Reenqueuer) Add(t *store.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) < reenqueueLimit {
		r.pending[t.ID] = t.Attempt
	}
}

// Pending is how many tasks wait for a retried enqueue.
func (r *Reenqueuer) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// Run tries the held tasks every interval until ctx ends.
func (r *Reenqueuer) Run(ctx context.Context) {
	every.Run(ctx, r.interval, func(ctx context.Context) { r.Round(ctx) })
}

// Round tries every held task once, oldest first, and returns how many jobs it created. It
// stops at the first failed enqueue (Redis still away) and keeps the rest for the next round.
func (r *Reenqueuer) Round(ctx context.Context) int {
	r.mu.Lock()
	ids := make([]int64, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	if len(ids) == 0 {
		return 0
	}
	slices.Sort(ids)
	// The first task alone: when Redis is still away, one try is all a round costs.
	created, ok := r.try(ctx, ids[0])
	if !ok {
		return 0
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan int64)
		stop = make(chan struct{})
		once sync.Once
	)
	for range min(reenqueueParallel, len(ids)-1) {
		wg.Go(func() {
			for id := range next {
				made, ok := r.try(ctx, id)
				if !ok {
					once.Do(func() { close(stop) })
					continue
				}
				mu.Lock()
				created += made
				mu.Unlock()
			}
		})
	}
feed:
	for _, id := range ids[1:] {
		select {
		case next <- id:
		case <-stop:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if created > 0 {
		r.logger.Info("handed tasks to asynq whose enqueue had failed", "tasks", created, "still_held", r.Pending())
	}
	return created
}

// try hands one task over. ok is false when it must be tried again (Postgres or Redis did not
// answer); a task handed over, or no longer waiting at its attempt, is dropped.
func (r *Reenqueuer) try(ctx context.Context, id int64) (created int, ok bool) {
	r.mu.Lock()
	attempt, held := r.pending[id]
	r.mu.Unlock()
	if !held {
		return 0, true
	}
	tctx, cancel := context.WithTimeout(ctx, reenqueueTimeout)
	defer cancel()
	t, err := r.store.GetByID(tctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		r.drop(id, attempt)
		return 0, true
	case err != nil:
		return 0, false
	case !t.Status.Waiting() || t.Attempt != attempt:
		r.drop(id, attempt)
		return 0, true
	}
	made, err := r.enqueuer.EnqueueNew(tctx, t)
	if err != nil {
		return 0, false
	}
	// The cleanup round need not take it for an orphan now; if this write is lost it does,
	// and finds the job in place.
	if err := r.store.MarkEnqueued(context.WithoutCancel(ctx), id, attempt); err != nil {
		r.logger.Debug("could not record a retried enqueue", "task_no", t.TaskNo, "err", err)
	}
	r.drop(id, attempt)
	if made {
		return 1, true
	}
	return 0, true
}

// drop forgets a task unless it was added again at another attempt meanwhile.
func (r *Reenqueuer) drop(id int64, attempt int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[id] == attempt {
		delete(r.pending, id)
	}
}
