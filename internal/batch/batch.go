// Package batch groups concurrent requests into one flush: the group commit behind the
// workers' claims and endings, the API's submits, asynq's pipelined script calls and the live
// notices. A request that finds the batcher idle goes at once; requests arriving while a flush
// is in flight wait for the next one and go together, optionally waiting a little for company
// (Config.MaxWait). Idle, the latency is one round trip; busy, the cost per request falls with
// the batch size. The flush answers every request; a caller of Submit returns only after its
// flush did.
package batch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskcenter/taskcenter/internal/config"
)

// Config tunes a batcher.
type Config struct {
	// MaxBatch caps one flush. Default worker.batch_max's default, 128.
	MaxBatch int
	// MaxWait is how long a request may wait for company, from when it was queued: a flush
	// whose first request has waited that long (behind the flush before) goes at once with
	// what is queued. Default 0: a flush takes what is queued and goes.
	MaxWait time.Duration
	// Queue is how many requests may wait for a flush. Default 4 × MaxBatch.
	Queue int
	// Observer, when set, hears of every flush (metrics).
	Observer Observer
}

// Observer hears how the grouped writes go: each flush's rows and duration, and how long
// each write waited from arrival to answer (what a submit, claim or ending actually waits).
// Implementations must be quick: they run on the flush loop.
type Observer interface {
	Flushed(rows int, took time.Duration)
	Waited(wait time.Duration)
}

func (c Config) withDefaults() Config {
	if c.MaxBatch <= 0 {
		c.MaxBatch = config.Default().Worker.BatchMax
	}
	if c.Queue <= 0 {
		c.Queue = 4 * c.MaxBatch
	}
	return c
}

// Batcher collects requests of type R and flushes them with flush, which must answer every
// request (fill its result) before returning.
type Batcher[R any] struct {
	cfg   Config
	in    chan queued[R]
	flush func(ctx context.Context, batch []*R)
	stop  chan struct{}
	done  chan struct{}

	mu     sync.RWMutex
	closed bool

	flushes atomic.Int64 // how many flushes ran
}

// queued is a request and when it was queued.
type queued[R any] struct {
	r  *R
	at time.Time
}

// New starts a batcher that flushes with flush; Close stops it.
func New[R any](cfg Config, flush func(context.Context, []*R)) *Batcher[R] {
	cfg = cfg.withDefaults()
	b := &Batcher[R]{cfg: cfg, in: make(chan queued[R], cfg.Queue), flush: flush, stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

func (b *Batcher[R]) loop() {
	defer close(b.done)
	for {
		var first queued[R]
		select {
		case first = <-b.in:
		case <-b.stop:
			// No request can arrive any more (see Close): answer what is queued and stop.
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
func (b *Batcher[R]) run(batch []queued[R]) {
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
func (b *Batcher[R]) collect(first queued[R]) []queued[R] {
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

// Submit queues r and waits until a flush answered it (closed done). Once queued, it waits
// whatever ctx says: the write may commit, and the caller must know how it went.
func (b *Batcher[R]) Submit(ctx context.Context, r *R, done <-chan struct{}) error {
	if err := b.Queue(ctx, r); err != nil {
		return err
	}
	<-done
	return nil
}

// Offer hands r to the next flush if the queue has room, without waiting for room or for the
// flush: ErrQueueFull when it has none.
func (b *Batcher[R]) Offer(r *R) error { return b.put(nil, r) }

// Queue hands r to the next flush, waiting for room as long as ctx allows, not for the flush.
func (b *Batcher[R]) Queue(ctx context.Context, r *R) error { return b.put(ctx, r) }

// ErrQueueFull is Offer's answer when no request can wait any more.
var ErrQueueFull = errors.New("batch queue full")

// put queues r: with a nil ctx only if there is room now.
func (b *Batcher[R]) put(ctx context.Context, r *R) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
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
			return ErrQueueFull
		}
	}
	select {
	case b.in <- q:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close refuses new requests, answers the queued ones and stops the loop.
func (b *Batcher[R]) Close() {
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

// ErrClosed answers a request made after Close.
var ErrClosed = errors.New("batcher closed")

// Flushes is how many flushes have run.
func (b *Batcher[R]) Flushes() int64 { return b.flushes.Load() }
