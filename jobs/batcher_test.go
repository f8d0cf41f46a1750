package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// Forty attempts ending at once share a few statements; every one ends with its own row.
func TestCompleterGroupsEndingsAndAnswersEachCaller(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3})
	ctx := context.Background()
	c := NewCompleter(f.st, BatchConfig{MaxBatch: 64, MaxWait: 5 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer c.Close()
	var leases []store.Lease
	for range 40 {
		task := f.task()
		cl, err := f.st.Claim(ctx, task.ID, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, cl.Lease)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(leases))
	for i, l := range leases {
		wg.Go(func() {
			row, err := c.End(ctx, store.SuccessEnding(l, store.Outcome{Status: store.StatusSuccess}))
			if err == nil && (row.ID != l.TaskID || row.Status != store.StatusSuccess) {
				err = errors.New("answered with another task's row")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ending %d: %v", i, err)
		}
	}
	if n := f.count(ctx, "SELECT count(*) FROM tasks WHERE status = 'SUCCESS'"); n != 40 {
		t.Fatalf("%d tasks ended", n)
	}
	if flushes := c.b.flushes.Load(); flushes >= 40 {
		t.Fatalf("%d flushes for 40 endings: nothing was grouped", flushes)
	}
}

// A flush that cannot reach the database acknowledges nobody: every caller gets an error and
// every row stays RUNNING (to be ended by a retry or taken over), none half-written.
func TestCompleterFlushThatFailsAcknowledgesNobody(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3})
	ctx := context.Background()
	u, _ := url.Parse(f.pg.URL)
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	db, err := store.Open(u.String(), store.OpenOptions{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cut := store.New(db)
	c := NewCompleter(cut, BatchConfig{MaxBatch: 16, MaxWait: 5 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer c.Close()
	var leases []store.Lease
	for range 6 {
		cl, err := f.st.Claim(ctx, f.task().ID, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, cl.Lease)
	}
	proxy.Cut()
	var wg sync.WaitGroup
	failed := make([]bool, len(leases))
	for i, l := range leases {
		wg.Go(func() {
			ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := c.End(ectx, store.SuccessEnding(l, store.Outcome{Status: store.StatusSuccess}))
			failed[i] = err != nil
		})
	}
	wg.Wait()
	for i, bad := range failed {
		if !bad {
			t.Fatalf("ending %d was acknowledged while the database was unreachable", i)
		}
	}
	if n := f.count(ctx, "SELECT count(*) FROM tasks WHERE status = 'RUNNING'"); n != 6 {
		t.Fatalf("%d of 6 rows still RUNNING", n)
	}
	proxy.Restore()
	if _, err := c.End(ctx, store.SuccessEnding(leases[0], store.Outcome{Status: store.StatusSuccess})); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
}

// Claims arriving together share a statement; each task is claimed once, even when two
// deliveries of it arrive in the same batch.
func TestClaimBatcherClaimsEachTaskOnce(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3})
	ctx := context.Background()
	b := NewClaimBatcher(f.st, "w", time.Minute, BatchConfig{MaxBatch: 64, MaxWait: 5 * time.Millisecond})
	defer b.Close()
	var ids []int64
	for range 20 {
		ids = append(ids, f.task().ID)
	}
	var mu sync.Mutex
	won := map[int64]int{}
	var wg sync.WaitGroup
	for _, id := range append(ids, ids...) { // every task delivered twice
		wg.Go(func() {
			c, err := b.Claim(ctx, id)
			var nc *store.NotClaimableError
			switch {
			case err == nil:
				mu.Lock()
				won[c.Task.ID]++
				mu.Unlock()
			case errors.As(err, &nc):
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if won[id] != 1 {
			t.Fatalf("task %d claimed %d times", id, won[id])
		}
	}
	if n := f.count(ctx, "SELECT count(*) FROM task_runs"); n != 20 {
		t.Fatalf("%d run rows for 20 claims", n)
	}
}

// MaxWait counts from when a request was queued: one that already waited that long behind a
// slow flush goes in the next flush at once, with what is queued, instead of waiting MaxWait
// again for company.
func TestBatcherWaitCountsFromTheRequestsArrival(t *testing.T) {
	t.Parallel()
	type req struct{ done chan struct{} }
	const maxWait = 2 * time.Second
	gate := make(chan struct{})
	var once sync.Once
	b := newBatcher(BatchConfig{MaxBatch: 16, MaxWait: maxWait}, func(_ context.Context, batch []*req) {
		once.Do(func() { <-gate }) // the first flush is slow
		for _, r := range batch {
			close(r.done)
		}
	})
	defer b.close()
	ctx := context.Background()
	first := &req{done: make(chan struct{})}
	go b.submit(ctx, first, first.done)        //nolint:errcheck // answered through done
	time.Sleep(maxWait + 200*time.Millisecond) // the first flush has taken first and is held
	second := &req{done: make(chan struct{})}
	go b.submit(ctx, second, second.done)      //nolint:errcheck // answered through done
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
	b := newBatcher(BatchConfig{MaxBatch: 8, Observer: obs}, func(_ context.Context, batch []*req) {
		time.Sleep(flushTakes)
		for _, r := range batch {
			close(r.done)
		}
	})
	var wg sync.WaitGroup
	for range writes {
		wg.Go(func() {
			r := &req{done: make(chan struct{})}
			if err := b.submit(context.Background(), r, r.done); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b.close()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	rows := 0
	for i, n := range obs.batches {
		rows += n
		if n < 1 || n > 8 || obs.flushes[i] < flushTakes {
			t.Fatalf("flush %d: %d rows in %s", i, n, obs.flushes[i])
		}
	}
	if rows != writes || int64(len(obs.batches)) != b.flushes.Load() {
		t.Fatalf("observer heard %d rows in %d flushes; want %d rows in %d", rows, len(obs.batches), writes, b.flushes.Load())
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
