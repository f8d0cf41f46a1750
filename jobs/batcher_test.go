package jobs

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// Forty attempts ending at once share a few statements; every one ends with its own row.
func TestCompleterGroupsEndingsAndAnswersEachCaller(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3})
	ctx := context.Background()
	c := NewCompleter(f.st, batch.Config{MaxBatch: 64, MaxWait: 5 * time.Millisecond}, slog.New(slog.DiscardHandler))
	defer c.Close()
	var leases []store.Lease
	for range 40 {
		task := f.task()
		cl, err := f.st.ClaimTask(ctx, task.ID, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, cl.Lease)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(leases))
	for i, l := range leases {
		wg.Go(func() {
			row, err := c.End(ctx, store.FinishedEnding(l, store.Outcome{Status: store.StatusSuccess}))
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
	if flushes := c.b.Flushes(); flushes >= 40 {
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
	c := NewCompleter(cut, batch.Config{MaxBatch: 16, MaxWait: 5 * time.Millisecond}, slog.New(slog.DiscardHandler))
	defer c.Close()
	var leases []store.Lease
	for range 6 {
		cl, err := f.st.ClaimTask(ctx, f.task().ID, "w", time.Minute)
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
			_, err := c.End(ectx, store.FinishedEnding(l, store.Outcome{Status: store.StatusSuccess}))
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
	if _, err := c.End(ctx, store.FinishedEnding(leases[0], store.Outcome{Status: store.StatusSuccess})); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
}

// Claims arriving together share a statement; each task is claimed once, even when two
// deliveries of it arrive in the same batch.
func TestClaimBatcherClaimsEachTaskOnce(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3})
	ctx := context.Background()
	b := NewClaimBatcher(f.st, "w", time.Minute, batch.Config{MaxBatch: 64, MaxWait: 5 * time.Millisecond})
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
