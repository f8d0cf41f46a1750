package batch

import (
	"context"
	"sync"
	"testing"
	"time"
)

// MaxWait counts from when a request was queued: one that already waited that long behind a
// slow flush goes in the next flush at once, with what is queued, instead of waiting MaxWait
// again for company.
func TestBatcherWaitCountsFromTheRequestsArrival(t *testing.T) {
	t.Parallel()
	type req struct{ done chan struct{} }
	const maxWait = 2 * time.Second
	gate := make(chan struct{})
	var once sync.Once
	b := New(Config{MaxBatch: 16, MaxWait: maxWait}, func(_ context.Context, batch []*req) {
		once.Do(func() { <-gate }) // the first flush is slow
		for _, r := range batch {
			close(r.done)
		}
	})
	defer b.Close()
	ctx := context.Background()
	first := &req{done: make(chan struct{})}
	go b.Submit(ctx, first, first.done)        //nolint:errcheck // answered through done
	time.Sleep(maxWait + 200*time.Millisecond) // the first flush has taken first and is held
	second := &req{done: make(chan struct{})}
	go b.Submit(ctx, second, second.done)      //nolint:errcheck // answered through done
	time.Sleep(maxWait + 200*time.Millisecond) // second has waited MaxWait behind it
	close(gate)
	<-first.done
	released := time.Now()
	select {
	case <-second.done:
	case <-time.After(maxWait / 2):
		t.Fatalf("a request that had waited %s was held %s more after the flush before it ended", maxWait, time.Since(released).Round(time.Millisecond))
	}
}

// recordingObserver keeps what a batcher told it.
type recordingObserver struct {
	mu      sync.Mutex
	batches []int
	flushes []time.Duration
	waits   []time.Duration
}

func (o *recordingObserver) Flushed(rows int, flush time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.batches = append(o.batches, rows)
	o.flushes = append(o.flushes, flush)
}

func (o *recordingObserver) Waited(wait time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waits = append(o.waits, wait)
}

// The observer hears every flush with its rows and duration, and every write's wait from its
// arrival to its answer: never less than the flush it went in, never measured from nowhere.
func TestBatcherTellsItsObserverEveryFlushAndWait(t *testing.T) {
	t.Parallel()
	const writes, flushTakes = 60, 3 * time.Millisecond
	obs := &recordingObserver{}
	type req struct{ done chan struct{} }
	b := New(Config{MaxBatch: 8, Observer: obs}, func(_ context.Context, batch []*req) {
		time.Sleep(flushTakes)
		for _, r := range batch {
			close(r.done)
		}
	})
	var wg sync.WaitGroup
	for range writes {
		wg.Go(func() {
			r := &req{done: make(chan struct{})}
			if err := b.Submit(context.Background(), r, r.done); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b.Close()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	rows := 0
	for i, n := range obs.batches {
		rows += n
		if n < 1 || n > 8 || obs.flushes[i] < flushTakes {
			t.Fatalf("flush %d: %d rows in %s", i, n, obs.flushes[i])
		}
	}
	if rows != writes || int64(len(obs.batches)) != b.Flushes() {
		t.Fatalf("observer heard %d rows in %d flushes; want %d rows in %d", rows, len(obs.batches), writes, b.Flushes())
	}
	if len(obs.waits) != writes {
		t.Fatalf("%d waits for %d writes", len(obs.waits), writes)
	}
	for _, w := range obs.waits {
		if w < flushTakes || w > time.Minute {
			t.Fatalf("a write waited %s: not measured from its arrival", w)
		}
	}
}
