package jobs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
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

// Forty requests submitting at once share a few insert statements, yet each gets its own task,
// its own audit row naming its own actor and request, and its own outbox event. A submit whose
// row the database refuses fails alone (the batch is written again one submit at a time), and
// two submits with the same idempotency key in one batch make one task.
func TestCreatorGroupsSubmitsAndKeepsEachRequestsOwnRows(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3})
	c := NewCreator(f.st, batch.Config{MaxBatch: 64, MaxWait: 20 * time.Millisecond}, slog.New(slog.DiscardHandler))
	defer c.Close()

	const n = 40
	type answer struct {
		created []store.Created
		err     error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			actor := fmt.Sprintf("user%02d", i)
			ctx := audit.NewContext(context.Background(), &audit.Origin{Actor: actor, Via: "token", ClientAddr: "10.0.0.1", RequestID: "req-" + actor})
			nt := store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "test:work", Owner: actor, Queue: "work", MaxRetry: 3, TimeoutSeconds: 60}
			switch i {
			case 7:
				nt.Params = json.RawMessage(`{"broken":`) // the database refuses this row's params
			case 11, 12:
				nt.Owner, nt.BizKey = "shared", "idem:same-key" // one task for both
			}
			created, err := c.Create(ctx, []store.NewTask{nt})
			answers[i] = answer{created, err}
		})
	}
	wg.Wait()

	ctx := context.Background()
	for i, a := range answers {
		switch {
		case i == 7:
			if a.err == nil {
				t.Fatal("the submit with broken params was accepted")
			}
		case a.err != nil:
			t.Fatalf("submit %d failed with its batch: %v", i, a.err)
		case len(a.created) != 1:
			t.Fatalf("submit %d: %d answers", i, len(a.created))
		}
	}
	if a, b := answers[11].created[0], answers[12].created[0]; a.Task.ID != b.Task.ID || a.Created == b.Created {
		t.Fatalf("same key: tasks %d and %d, created %v and %v; want one task, created once", a.Task.ID, b.Task.ID, a.Created, b.Created)
	}
	for i, a := range answers {
		if i == 7 || i == 11 || i == 12 {
			continue
		}
		actor := fmt.Sprintf("user%02d", i)
		task := a.created[0].Task
		if !a.created[0].Created || task.Owner != actor {
			t.Fatalf("submit %d answered with %s's task (created %v)", i, task.Owner, a.created[0].Created)
		}
		var auditActor, auditReq string
		if err := f.pg.DB.QueryRowContext(ctx, `SELECT actor, request_id FROM audit_events WHERE action = 'task.submit' AND target = ?`,
			task.TaskNo).Scan(&auditActor, &auditReq); err != nil {
			t.Fatalf("audit row of submit %d: %v", i, err)
		}
		if auditActor != actor || auditReq != "req-"+actor {
			t.Fatalf("submit %d's audit row names %s / %s", i, auditActor, auditReq)
		}
	}
	if got := f.count(ctx, "SELECT count(*) FROM tasks"); got != n-2 {
		t.Fatalf("%d tasks; want %d", got, n-2)
	}
	if got := f.count(ctx, "SELECT count(*) FROM audit_events WHERE action = 'task.submit'"); got != n-2 {
		t.Fatalf("%d submit audit rows; want %d (one per task created)", got, n-2)
	}
	if got := f.count(ctx, "SELECT count(*) FROM task_events WHERE event = 'task.submitted'"); got != n-2 {
		t.Fatalf("%d submitted events; want %d", got, n-2)
	}
	if flushes := c.b.Flushes(); flushes >= n {
		t.Fatalf("%d flushes for %d submits: nothing was grouped", flushes, n)
	}
}
