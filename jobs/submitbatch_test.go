package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/webhooks"
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

// A caller's idempotency key names one request: the same key with the same parameters is
// answered with its task, with other parameters refused (KeyReusedError), alone in a batch.
// A notification sent with a replay is bound to the task it is answered with, once per URL:
// the secret is shown when this submit made the subscription, not again.
func TestReplaysKeepTheKeysRequestAndBindTheirNotification(t *testing.T) {
	t.Parallel()
	f := newRTFixture(t, TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Hour})
	ctx := context.Background()
	sub := f.submitter(SubmitPolicy{Queue: "work", MaxRetry: 3, TimeoutSeconds: 600}).WithNotifyPayload(func(store.Event, int64, *store.Task) (json.RawMessage, error) {
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
