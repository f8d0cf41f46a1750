package jobs

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many submits finding a stale waiting count at once send one count to the database, not one
// each; and an owner at the cap is refused on a fresh count, so a cap freed up admits again.
func TestWaitingCountsCountOnceForABurst(t *testing.T) {
	t.Parallel()
	w := newWaitingCounts()
	var counts atomic.Int64
	release := make(chan struct{})
	count := func(context.Context) (int, error) {
		counts.Add(1)
		<-release
		return 5, nil
	}
	ctx := context.Background()
	if ok, err := w.below(ctx, "k", 10, func(context.Context) (int, error) { return 5, nil }); !ok || err != nil {
		t.Fatal(ok, err)
	}
	w.mu.Lock()
	w.counts["k"] = waitingCount{n: 5, at: time.Now().Add(-2 * time.Second)} // stale
	w.mu.Unlock()
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 32 {
		wg.Go(func() {
			if ok, err := w.below(ctx, "k", 10, count); ok && err == nil {
				admitted.Add(1)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if c := counts.Load(); c != 1 {
		t.Fatalf("%d counts for one burst; want 1", c)
	}
	if admitted.Load() != 32 {
		t.Fatalf("%d of 32 admitted under the limit", admitted.Load())
	}

	// At the cap: refused; after recheck a fresh count that shows room admits again. (A
	// longer recheck than the default, so a slow machine cannot make the first look late.)
	w.mu.Lock()
	w.recheck = 500 * time.Millisecond
	w.counts["k"] = waitingCount{n: 10, at: time.Now()}
	w.mu.Unlock()
	if ok, _ := w.below(ctx, "k", 10, func(context.Context) (int, error) { return 3, nil }); ok {
		t.Fatal("admitted at the cap on a fresh figure")
	}
	time.Sleep(w.recheck + 10*time.Millisecond)
	if ok, _ := w.below(ctx, "k", 10, func(context.Context) (int, error) { return 3, nil }); !ok {
		t.Fatal("refused although a fresh count shows room")
	}
}
