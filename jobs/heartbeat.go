package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/taskcenter/taskcenter/internal/every"
	"github.com/taskcenter/taskcenter/store"
)

// heartbeater proves every running attempt of the process alive with one statement per
// interval, instead of one per attempt: with a hundred imports running, a hundred UPDATEs a
// tick become one. Each attempt hears its own answer: a cancel request, or that it no longer
// owns its task (then it is stopped).
type heartbeater struct {
	store    *store.Store
	interval time.Duration
	logger   *slog.Logger

	mu   sync.Mutex
	runs map[int64]*beating // by task id

	stop context.CancelFunc
	done chan struct{}
}

// beating is one registered attempt.
type beating struct {
	run    *Run
	fenced func() // stops the attempt
}

func newHeartbeater(st *store.Store, interval time.Duration, logger *slog.Logger) *heartbeater {
	ctx, stop := context.WithCancel(context.Background())
	h := &heartbeater{store: st, interval: interval, logger: logger, runs: map[int64]*beating{}, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		every.Run(ctx, interval, func(context.Context) { h.beat() })
	}()
	return h
}

// add registers a running attempt until remove.
func (h *heartbeater) add(run *Run, fenced func()) {
	h.mu.Lock()
	h.runs[run.Lease.TaskID] = &beating{run: run, fenced: fenced}
	h.mu.Unlock()
}

func (h *heartbeater) remove(run *Run) {
	h.mu.Lock()
	if b := h.runs[run.Lease.TaskID]; b != nil && b.run == run {
		delete(h.runs, run.Lease.TaskID)
	}
	h.mu.Unlock()
}

func (h *heartbeater) close() {
	h.stop()
	<-h.done
}

func (h *heartbeater) beat() {
	h.mu.Lock()
	runs := make([]*beating, 0, len(h.runs))
	leases := make([]store.Lease, 0, len(h.runs))
	for _, b := range h.runs {
		runs = append(runs, b)
		leases = append(leases, b.run.Lease)
	}
	h.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.interval)
	alive, err := h.store.HeartbeatMany(ctx, leases)
	cancel()
	if err != nil {
		h.logger.Warn("heartbeat failed", "attempts", len(leases), "err", err)
		return
	}
	for _, b := range runs {
		req, ok := alive[b.run.Lease.TaskID]
		if !ok {
			b.run.Logger.Warn("attempt lost ownership of the task; stopping it")
			h.remove(b.run)
			b.fenced()
			continue
		}
		b.run.observeCancel(req)
	}
}
