package jobs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

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

// A caller's idempotency key names one request: the same key with the same parameters is
// answered with its task, with other parameters refused (KeyReusedError), alone in a batch.
// A notification sent with a replay is bound to the task it is answered with, once per URL:
// the secret is shown when this submit made the subscription, not again.
func TestReplaysKeepTheKeysRequestAndBindTheirNotification(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour})
	ctx := context.Background()
	sub := NewSubmitter(f.st, f.enqueuer(), map[string]SubmitPolicy{"test:work": {Queue: "work", MaxRetry: 3, TimeoutSeconds: 600}},
		nil, nil, slog.New(slog.DiscardHandler), nil).WithNotifyPayload(func(store.Event, int64, *store.Task) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})
	first := Submission{Type: "test:work", Owner: "alice", BizKey: CallerKey("k1"), Params: json.RawMessage(`{"a":1,"b":2}`)}
	made, created, err := sub.Submit(ctx, first)
	if err != nil || !created {
		t.Fatalf("first submit: created %v, %v", created, err)
	}
	same := first
	same.Params = json.RawMessage(`{"b":2,"a":1}`) // the same document, keys reordered
	other := first
	other.Params = json.RawMessage(`{"a":2}`)
	hook := &webhooks.NewSubscription{URL: "http://127.0.0.1:9/done", Events: []string{store.EventSucceeded}, Secret: "whsec_0123456789abcdef", CreatedBy: "alice"}
	withHook := same
	withHook.Notify = hook
	res, err := sub.SubmitMany(ctx, []Submission{same, other, withHook, withHook})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Created || res[0].Task.TaskNo != made.TaskNo || res[0].Subscription != nil {
		t.Fatalf("same request: %+v", res[0])
	}
	var reused *KeyReusedError
	if !errors.As(res[1].Err, &reused) || reused.TaskNo != made.TaskNo {
		t.Fatalf("key reused with other params: %+v", res[1])
	}
	if res[2].Err != nil || res[2].Subscription == nil || !res[2].SubscriptionCreated || res[2].Subscription.Secret != hook.Secret {
		t.Fatalf("notification of a replay: %+v", res[2])
	}
	if res[3].Subscription == nil || res[3].SubscriptionCreated || res[3].Subscription.SubNo != res[2].Subscription.SubNo {
		t.Fatalf("the same notification again: %+v, want %s not created", res[3].Subscription, res[2].Subscription.SubNo)
	}
}
