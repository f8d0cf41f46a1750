package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// A worker frozen in the middle of a batch (SIGSTOP, a VM pause) keeps its transaction open
// with the task row locked. The session limit ends that transaction on the server, so another
// worker's takeover goes ahead instead of waiting on the lock, and the frozen batch, when its
// process wakes, writes nothing. Both ways the limit reaches a session are covered: as a
// startup parameter (direct connection) and per transaction (behind a pooler).
func TestAFrozenBatchDoesNotHoldTheTakeoverHostage(t *testing.T) {
	t.Parallel()
	for _, pooler := range []bool{false, true} {
		name := "direct connection"
		if pooler {
			name = "through a transaction pooler"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pg := storetest.NewPostgres(t)
			f := &fixture{&storetest.Fixture{T: t, DB: pg.DB, S: store.New(pg.DB)}}
			opts := store.OpenOptions{MaxOpenConns: 2, Pooler: pooler, IdleInTransactionTimeout: 500 * time.Millisecond, LockTimeout: time.Second}
			frozenDB, err := store.Open(pg.URL, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer frozenDB.Close()
			ctx := context.Background()
			if err := store.CheckSessionLimits(ctx, frozenDB, opts); err != nil {
				t.Fatalf("the limits did not reach the session: %v", err)
			}
			frozen := store.New(frozenDB)

			task := f.Task()
			c, err := frozen.ClaimTask(ctx, task.ID, "frozen", takeover)
			if err != nil {
				t.Fatal(err)
			}
			f.staleHeartbeat(task.ID)

			locked, wake, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				_, err := frozen.CommitBatch(ctx, c.Lease, func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
					close(locked) // the row is locked; the process now "freezes"
					<-wake
					return store.Batch{TotalDelta: 7, SuccessDelta: 7, ProgressCurrent: 7, ProgressTotal: 7}, nil
				})
				done <- err
			}()
			<-locked

			// Without the limit this claim waits on the row until its own deadline.
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			taken, err := f.S.ClaimTask(cctx, task.ID, "rescuer", takeover)
			if err != nil {
				t.Fatalf("takeover of the frozen worker's task: %v", err)
			}
			if taken.Trigger != "takeover" || taken.Lease.Attempt != c.Lease.Attempt+1 {
				t.Fatalf("claimed as %s at attempt %d, want a takeover at attempt %d", taken.Trigger, taken.Lease.Attempt, c.Lease.Attempt+1)
			}

			close(wake)
			if err := <-done; err == nil {
				t.Fatal("the frozen batch committed after its transaction was ended")
			}
			got := f.Get(task.ID)
			if got.SuccessCount != 0 || got.TotalCount != 0 || got.Attempt != taken.Lease.Attempt || got.Worker != "rescuer" {
				t.Fatalf("after the frozen worker woke: counts %d/%d, attempt %d, worker %q; want nothing written by it",
					got.SuccessCount, got.TotalCount, got.Attempt, got.Worker)
			}
			// A later batch of the woken worker is fenced out as usual.
			_, err = frozen.CommitBatch(ctx, c.Lease, func(context.Context, bun.Tx) (store.Batch, error) { return store.Batch{SuccessDelta: 1}, nil })
			if !errors.Is(err, store.ErrFenced) {
				t.Fatalf("the woken worker's next batch: %v, want ErrFenced", err)
			}
		})
	}
}

// A pool whose limits the server did not take is refused at start-up, not discovered when a
// frozen process holds a row.
func TestSessionLimitsThatDidNotArriveAreReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	err := store.CheckSessionLimits(context.Background(), f.DB, store.OpenOptions{IdleInTransactionTimeout: 1234 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "idle_in_transaction_session_timeout = 0ms, want 1234ms") {
		t.Fatalf("a pool without the limit: %v, want the setting named with both values", err)
	}
}
