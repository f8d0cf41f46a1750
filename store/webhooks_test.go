package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/store"
)

var terminalEvents = []string{store.EventSucceeded, store.EventPartiallySucceded, store.EventFailed, store.EventTimedOut, store.EventCancelled}

func testPayload(ev store.Event, task *store.Task) (json.RawMessage, error) {
	return json.Marshal(map[string]any{"id": fmt.Sprintf("evt_%d", ev.ID), "type": ev.Event, "task": task.TaskNo, "status": ev.Status})
}

func (f *fixture) subscribe(owner string, events ...string) *store.Subscription {
	f.t.Helper()
	sub, err := f.s.CreateSubscription(context.Background(), store.NewSubscription{Owner: owner, URL: "http://127.0.0.1:1/hook",
		Events: events, Secret: "s3cret-s3cret-s3cret", CreatedBy: owner})
	if err != nil {
		f.t.Fatal(err)
	}
	return sub
}

// fanOutAll fans out until nothing is left and returns the deliveries created.
func (f *fixture) fanOutAll() int {
	f.t.Helper()
	total := 0
	for {
		n, d, err := f.s.FanOut(context.Background(), 100, testPayload)
		if err != nil {
			f.t.Fatal(err)
		}
		total += d
		if n == 0 {
			return total
		}
	}
}

// deliveredEvents lists the (event name, task) of every delivery of a subscription.
func (f *fixture) deliveredEvents(sub *store.Subscription) []string {
	f.t.Helper()
	ds, err := f.s.Deliveries(context.Background(), sub.ID, store.DeliveryFilter{Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.TaskNo+" "+d.Event)
	}
	slices.Sort(out)
	return out
}

func (f *fixture) succeed(task *store.Task) {
	f.t.Helper()
	l := f.claim(task, "w1")
	if _, err := f.s.Succeed(context.Background(), l, store.Outcome{Status: store.StatusSuccess}); err != nil {
		f.t.Fatal(err)
	}
}

func TestFanOutDeliversEachCommittedEventOncePerSubscription(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	terminal := f.subscribe("alice", terminalEvents...)
	started := f.subscribe("alice", store.EventStarted, store.EventSucceeded)
	bobs := f.subscribe("bob", terminalEvents...)
	task := f.task()
	f.succeed(task)

	if got := f.fanOutAll(); got != 3 {
		t.Fatalf("deliveries created = %d, want 3 (terminal: succeeded; started: started+succeeded)", got)
	}
	if got, want := f.deliveredEvents(terminal), []string{task.TaskNo + " task.succeeded"}; !slices.Equal(got, want) {
		t.Errorf("terminal subscription got %v, want %v", got, want)
	}
	if got := f.deliveredEvents(started); len(got) != 2 {
		t.Errorf("started+succeeded subscription got %v", got)
	}
	if got := f.deliveredEvents(bobs); len(got) != 0 {
		t.Errorf("bob's subscription heard of alice's task: %v", got)
	}
	// Fanned out once: a second pass finds nothing.
	if n, d, err := f.s.FanOut(ctx, 100, testPayload); err != nil || n != 0 || d != 0 {
		t.Fatalf("second fan-out: events=%d deliveries=%d err=%v", n, d, err)
	}
}

// An event no subscription wants is never left for the fan-out (marked as it is inserted);
// one a subscription wants is, once; and a subscription created later hears of what follows.
func TestEventsNobodyWantsAreNotLeftForTheFanOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	pending := func() int {
		var n int
		if err := f.db.DB.QueryRowContext(ctx, `SELECT count(*) FROM task_events WHERE webhooks_at IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	quiet := f.task()
	f.succeed(quiet)
	if n := pending(); n != 0 {
		t.Fatalf("%d events left for the fan-out with no subscription at all", n)
	}
	if got := f.fanOutAll(); got != 0 {
		t.Fatalf("%d deliveries with no subscription", got)
	}

	terminal := f.subscribe("alice", terminalEvents...)
	heard := f.task()
	f.succeed(heard)
	if n := pending(); n != 1 {
		t.Fatalf("%d events pending; want 1 (the terminal event the subscription wants; not submitted or started)", n)
	}
	if got := f.fanOutAll(); got != 1 {
		t.Fatalf("%d deliveries; want 1", got)
	}
	if got, want := f.deliveredEvents(terminal), []string{heard.TaskNo + " task.succeeded"}; !slices.Equal(got, want) {
		t.Fatalf("subscription got %v, want %v (nothing of the task finished before it existed)", got, want)
	}

	// A notify_url subscription bound to a running task: its ending is left for the fan-out.
	running := f.task()
	l := f.claim(running, "w1")
	ns := store.NewSubscription{Owner: "bob", URL: "http://127.0.0.1:1/hook", Events: terminalEvents, Secret: "s3cret-s3cret-s3cret", CreatedBy: "bob"}
	bound, _, err := f.s.CreateTaskSubscription(ctx, running.ID, ns, testPayload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Succeed(ctx, l, store.Outcome{Status: store.StatusSuccess}); err != nil {
		t.Fatal(err)
	}
	f.fanOutAll()
	if got, want := f.deliveredEvents(bound), []string{running.TaskNo + " task.succeeded"}; !slices.Equal(got, want) {
		t.Fatalf("task subscription got %v, want %v", got, want)
	}
}

// The outbox gap: ids are drawn at insert, commits land out of order. An event committed
// after a later-numbered one was fanned out is still fanned out, and one whose transaction
// rolled back never is.
func TestFanOutNeitherSkipsLateCommitsNorSeesRollbacks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sub := f.subscribe("alice", terminalEvents...)
	early, late, rolled := f.task(), f.task(), f.task()

	insertEvent := `INSERT INTO task_events (task_id, task_no, owner, task_type, event, status, attempt, actor)
		SELECT id, task_no, owner, type, 'task.succeeded', 'SUCCESS', 1, 'test' FROM tasks WHERE id = $1`
	// A transaction draws the smaller id and stays open...
	slow, err := f.db.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Rollback() }) //nolint:errcheck // done already when the test passes
	if _, err := slow.ExecContext(ctx, insertEvent, early.ID); err != nil {
		t.Fatal(err)
	}
	// ...one that will roll back too...
	doomed, err := f.db.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { doomed.Rollback() }) //nolint:errcheck // done already when the test passes
	if _, err := doomed.ExecContext(ctx, insertEvent, rolled.ID); err != nil {
		t.Fatal(err)
	}
	// ...while a later event commits and is fanned out.
	f.succeed(late)
	if got := f.fanOutAll(); got != 1 {
		t.Fatalf("first fan-out created %d deliveries, want 1", got)
	}
	if err := slow.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := doomed.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := f.fanOutAll(); got != 1 {
		t.Fatalf("after the late commit, fan-out created %d deliveries, want 1", got)
	}
	want := []string{early.TaskNo + " task.succeeded", late.TaskNo + " task.succeeded"}
	slices.Sort(want)
	if got := f.deliveredEvents(sub); !slices.Equal(got, want) {
		t.Fatalf("deliveries %v, want %v (none for %s, rolled back)", got, want, rolled.TaskNo)
	}
}

// A notify_url subscription is created after its task: events the task committed before are
// delivered through the backfill, later ones through the fan-out, each exactly once.
func TestTaskSubscriptionGetsEventsBeforeAndAfterItExists(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	done, running := f.task(), f.task()
	f.succeed(done)
	l := f.claim(running, "w1")
	ns := store.NewSubscription{Owner: "alice", URL: "http://127.0.0.1:1/hook", Events: terminalEvents, Secret: "s3cret-s3cret-s3cret", CreatedBy: "alice"}

	subDone, created, err := f.s.CreateTaskSubscription(ctx, done.ID, ns, testPayload)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if got := f.deliveredEvents(subDone); len(got) != 1 {
		t.Fatalf("backfill of a finished task: %v", got)
	}
	subRunning, _, err := f.s.CreateTaskSubscription(ctx, running.ID, ns, testPayload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Succeed(ctx, l, store.Outcome{Status: store.StatusSuccess}); err != nil {
		t.Fatal(err)
	}
	f.fanOutAll()
	if got := f.deliveredEvents(subDone); len(got) != 1 {
		t.Errorf("finished task's subscription after fan-out: %v (the backfilled event twice?)", got)
	}
	if got, want := f.deliveredEvents(subRunning), []string{running.TaskNo + " task.succeeded"}; !slices.Equal(got, want) {
		t.Errorf("running task's subscription: %v, want %v", got, want)
	}
	// The same URL again (an idempotent resubmit) returns the first subscription.
	again, created, err := f.s.CreateTaskSubscription(ctx, done.ID, ns, testPayload)
	if err != nil || created || again.SubNo != subDone.SubNo {
		t.Fatalf("resubmit: created=%v sub=%v err=%v", created, again, err)
	}
}

func TestDeliveryClaimFencesAndCapsPerSubscription(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sub := f.subscribe("alice", terminalEvents...)
	for range 5 {
		f.succeed(f.task())
	}
	f.fanOutAll()

	got, err := f.s.ClaimDeliveries(ctx, 10, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("claimed %d, want 2 (the per-subscription cap)", len(got))
	}
	if got[0].URL != sub.URL || got[0].Secret != sub.Secret || got[0].Attempts != 1 || got[0].State != store.DeliverySending {
		t.Fatalf("claimed delivery: %+v", got[0])
	}
	if more, _ := f.s.ClaimDeliveries(ctx, 10, 2, time.Minute); len(more) != 0 {
		t.Fatalf("claimed %d more while the subscription has 2 in flight", len(more))
	}
	// A failure schedules the next attempt; the lease holder's write lands once.
	next := time.Now().Add(-time.Second)
	d, ok, err := f.s.RecordAttempt(ctx, &got[0].Delivery, store.AttemptResult{StatusCode: 500, Latency: 12 * time.Millisecond, Error: "HTTP 500", NextAt: next})
	if err != nil || !ok || d.State != store.DeliveryPending || d.LastStatus == nil || *d.LastStatus != 500 {
		t.Fatalf("record failure: %+v %v %v", d, ok, err)
	}
	if _, ok, _ := f.s.RecordAttempt(ctx, &got[0].Delivery, store.AttemptResult{Delivered: true, StatusCode: 200}); ok {
		t.Fatal("a second write of the same attempt landed")
	}
	// A lapsed lease is claimed again, and the old holder's write is refused.
	f.exec("UPDATE webhook_deliveries SET due_at = now() - interval '1 second' WHERE id = ?", got[1].ID)
	again, err := f.s.ClaimDeliveries(ctx, 10, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var reclaimed *store.Outgoing
	for i := range again {
		if again[i].ID == got[1].ID {
			reclaimed = &again[i]
		}
	}
	if reclaimed == nil || reclaimed.Attempts != 2 {
		t.Fatalf("lapsed lease not reclaimed: %+v", again)
	}
	if _, ok, _ := f.s.RecordAttempt(ctx, &got[1].Delivery, store.AttemptResult{Delivered: true, StatusCode: 200}); ok {
		t.Fatal("the lapsed holder's write landed")
	}
	d, ok, err = f.s.RecordAttempt(ctx, &reclaimed.Delivery, store.AttemptResult{Error: "gave up"})
	if err != nil || !ok || d.State != store.DeliveryDead {
		t.Fatalf("give up: %+v %v %v", d, ok, err)
	}
	atts, err := f.s.DeliveryAttempts(ctx, []int64{got[0].ID, got[1].ID})
	if err != nil || len(atts[got[0].ID]) != 1 || len(atts[got[1].ID]) != 1 || atts[got[1].ID][0].Attempt != 2 {
		t.Fatalf("attempts: %+v %v", atts, err)
	}
	// Redeliver brings a dead delivery back at once.
	r, err := f.s.Redeliver(ctx, sub.ID, reclaimed.DeliveryNo)
	if err != nil || r.State != store.DeliveryPending {
		t.Fatalf("redeliver: %+v %v", r, err)
	}
	if _, err := f.s.Redeliver(ctx, sub.ID+1000, reclaimed.DeliveryNo); err != store.ErrDeliveryNotFound {
		t.Fatalf("redeliver through another subscription: %v", err)
	}
}

func TestSubscriptionsAreScopedToTheirOwner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := f.subscribe("alice", terminalEvents...)
	f.subscribe("bob", terminalEvents...)
	if _, err := f.s.GetSubscription(ctx, a.SubNo, store.Scope{Owner: "bob"}); err != store.ErrSubscriptionNotFound {
		t.Fatalf("bob sees alice's subscription: %v", err)
	}
	if err := f.s.DeleteSubscription(ctx, a.SubNo, store.Scope{Owner: "bob"}); err != store.ErrSubscriptionNotFound {
		t.Fatalf("bob deletes alice's subscription: %v", err)
	}
	mine, _ := f.s.ListSubscriptions(ctx, store.Scope{Owner: "alice"}, "bob", 10)
	all, _ := f.s.ListSubscriptions(ctx, store.Scope{Owner: "ops", Admin: true}, "", 10)
	if len(mine) != 1 || mine[0].Owner != "alice" || len(all) != 2 {
		t.Fatalf("alice lists %d, admin lists %d", len(mine), len(all))
	}
	if !slices.Equal(mine[0].Events, terminalEvents) {
		t.Fatalf("events read back as %v", mine[0].Events)
	}
	if err := f.s.DeleteSubscription(ctx, a.SubNo, store.Scope{Owner: "ops", Admin: true}); err != nil {
		t.Fatal(err)
	}
}

func TestPruneDeliveriesKeepsUnfinishedOnes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sub := f.subscribe("alice", terminalEvents...)
	for range 3 {
		f.succeed(f.task())
	}
	f.fanOutAll()
	f.exec("UPDATE webhook_deliveries SET updated_at = now() - interval '8 days'")
	f.exec("UPDATE webhook_deliveries SET state = 'delivered' WHERE id IN (SELECT id FROM webhook_deliveries ORDER BY id LIMIT 2)")
	n, err := f.s.PruneDeliveries(ctx, 7*24*time.Hour, 100)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want the 2 delivered ones", n, err)
	}
	if left := f.deliveredEvents(sub); len(left) != 1 {
		t.Fatalf("left %v; the pending delivery must stay", left)
	}
}

// A notify_url subscription created while its task moves on: whatever the interleaving, the
// subscription hears every event it wants exactly once, from its own backfill or from the
// fan-out. Each round races the subscription against a claim and a success of a fresh task;
// an event whose statement waited for the subscription to commit must see it (the task row's
// webhook_bound), not the statement's older snapshot.
func TestTaskSubscriptionRacingTransitionsHearsEveryEventOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	want := []string{store.EventStarted, store.EventSucceeded}
	for round := range 60 {
		task := f.task()
		ns := store.NewSubscription{Owner: "alice", URL: "http://127.0.0.1:1/hook", Events: want, Secret: "s3cret-s3cret-s3cret", CreatedBy: "alice"}
		start := make(chan struct{})
		var sub *store.Subscription
		var subErr, runErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
			sub, _, subErr = f.s.CreateTaskSubscription(ctx, task.ID, ns, testPayload)
		})
		wg.Go(func() {
			<-start
			c, err := f.s.Claim(ctx, task.ID, "w1", time.Minute)
			if err != nil {
				runErr = err
				return
			}
			_, runErr = f.s.Succeed(ctx, c.Lease, store.Outcome{Status: store.StatusSuccess})
		})
		close(start)
		wg.Wait()
		if subErr != nil || runErr != nil {
			t.Fatalf("round %d: subscribe %v, run %v", round, subErr, runErr)
		}
		f.fanOutAll()
		got := f.deliveredEvents(sub)
		exp := []string{task.TaskNo + " " + store.EventStarted, task.TaskNo + " " + store.EventSucceeded}
		if !slices.Equal(got, exp) {
			t.Fatalf("round %d: the subscription got %v, want %v", round, got, exp)
		}
	}
}
