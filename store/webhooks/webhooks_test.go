package webhooks_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/internal/columntest"
	"github.com/taskcenter/taskcenter/store/pg"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

var terminalEvents = []string{store.EventSucceeded, store.EventPartiallySucceded, store.EventFailed, store.EventTimedOut, store.EventCancelled}

func testPayload(ev store.Event, sequence int64, task *store.Task) (json.RawMessage, error) {
	return json.Marshal(map[string]any{"id": fmt.Sprintf("evt_%d", ev.ID), "type": ev.Event, "sequence": sequence, "task": task.TaskNo, "status": ev.Status})
}

// newSubscription is what an owner gives to hear of the events on a receiver that never answers.
func newSubscription(owner string, events ...string) webhooks.NewSubscription {
	return webhooks.NewSubscription{Owner: owner, URL: "http://127.0.0.1:1/hook", Events: events, Secret: "s3cret-s3cret-s3cret", CreatedBy: owner}
}

func (f *fixture) subscribe(owner string, events ...string) *webhooks.Subscription {
	f.T.Helper()
	sub, err := f.S.CreateSubscription(context.Background(), newSubscription(owner, events...))
	if err != nil {
		f.T.Fatal(err)
	}
	return sub
}

// fanOutAll fans out until nothing is left and returns the deliveries created.
func (f *fixture) fanOutAll() int {
	f.T.Helper()
	total := 0
	for {
		n, d, err := f.S.FanOut(context.Background(), 100, testPayload)
		if err != nil {
			f.T.Fatal(err)
		}
		total += d
		if n == 0 {
			return total
		}
	}
}

// deliveredEvents lists the (event name, task) of every delivery of a subscription.
func (f *fixture) deliveredEvents(sub *webhooks.Subscription) []string {
	f.T.Helper()
	ds, err := f.S.Deliveries(context.Background(), sub.ID, webhooks.DeliveryFilter{Limit: 1000})
	if err != nil {
		f.T.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.TaskNo+" "+d.Event)
	}
	slices.Sort(out)
	return out
}

// succeed runs the task to SUCCESS on worker w1.
func (f *fixture) succeed(task *store.Task) {
	f.T.Helper()
	f.endSucceeded(f.Claim(task, "w1"))
}

// succeededWithDeliveries subscribes alice to the terminal events, runs n of her tasks to
// SUCCESS and fans their events out: n deliveries of the subscription it returns.
func (f *fixture) succeededWithDeliveries(n int) *webhooks.Subscription {
	f.T.Helper()
	sub := f.subscribe("alice", terminalEvents...)
	for range n {
		f.succeed(f.Task())
	}
	f.fanOutAll()
	return sub
}

// endSucceeded ends the running attempt l with SUCCESS.
func (f *fixture) endSucceeded(l store.Lease) {
	f.T.Helper()
	if _, err := f.S.EndFinished(context.Background(), l, store.Outcome{Status: store.StatusSuccess}); err != nil {
		f.T.Fatal(err)
	}
}

// The column lists the statements name are exactly the models' columns, in model order.
func TestColumnListsMatchModels(t *testing.T) {
	t.Parallel()
	columntest.Check(t, webhooks.ColumnLists())
}

func TestFanOutDeliversEachCommittedEventOncePerSubscription(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	terminal := f.subscribe("alice", terminalEvents...)
	started := f.subscribe("alice", store.EventStarted, store.EventSucceeded)
	bobs := f.subscribe("bob", terminalEvents...)
	task := f.Task()
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
	if n, d, err := f.S.FanOut(ctx, 100, testPayload); err != nil || n != 0 || d != 0 {
		t.Fatalf("second fan-out: events=%d deliveries=%d err=%v", n, d, err)
	}
}

// An event no subscription wants is never left for the fan-out (marked as it is inserted);
// one a subscription wants is, once; and a subscription created later hears of what follows.
func TestEventsNobodyWantsAreNotLeftForTheFanOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// fanOut checks how many events are left for the fan-out (when), then fans them out and
	// checks the deliveries made: as many.
	fanOut := func(want int, when string) {
		t.Helper()
		var n int
		if err := f.DB.DB.QueryRowContext(ctx, `SELECT count(*) FROM task_events WHERE webhooks_at IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("%d events left for the fan-out %s; want %d", n, when, want)
		}
		if got := f.fanOutAll(); got != want {
			t.Fatalf("%d deliveries %s; want %d", got, when, want)
		}
	}
	quiet := f.Task()
	f.succeed(quiet)
	fanOut(0, "with no subscription at all")

	terminal := f.subscribe("alice", terminalEvents...)
	heard := f.Task()
	f.succeed(heard)
	fanOut(1, "with one subscription (the terminal event it wants; not submitted or started)")
	if got, want := f.deliveredEvents(terminal), []string{heard.TaskNo + " task.succeeded"}; !slices.Equal(got, want) {
		t.Fatalf("subscription got %v, want %v (nothing of the task finished before it existed)", got, want)
	}

	// A notify_url subscription bound to a running task: its ending is left for the fan-out.
	running := f.Task()
	l := f.Claim(running, "w1")
	ns := newSubscription("bob", terminalEvents...)
	bound, _, err := f.S.CreateTaskSubscription(ctx, running.ID, ns, testPayload)
	if err != nil {
		t.Fatal(err)
	}
	f.endSucceeded(l)
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
	early, late, rolled := f.Task(), f.Task(), f.Task()

	// insertEvent inserts the task's event in a transaction it leaves open.
	insertEvent := func(task *store.Task) *sql.Tx {
		t.Helper()
		tx, err := f.DB.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() }) //nolint:errcheck // done already when the test passes
		if _, err := tx.ExecContext(ctx, `INSERT INTO task_events (task_id, task_no, owner, task_type, event, status, attempt, actor)
			SELECT id, task_no, owner, type, 'task.succeeded', 'SUCCESS', 1, 'test' FROM tasks WHERE id = $1`, task.ID); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	// A transaction draws the smaller id and stays open...
	slow := insertEvent(early)
	// ...one that will roll back too...
	doomed := insertEvent(rolled)
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
	done, running := f.Task(), f.Task()
	f.succeed(done)
	l := f.Claim(running, "w1")
	ns := newSubscription("alice", terminalEvents...)

	subDone, created, err := f.S.CreateTaskSubscription(ctx, done.ID, ns, testPayload)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if got := f.deliveredEvents(subDone); len(got) != 1 {
		t.Fatalf("backfill of a finished task: %v", got)
	}
	subRunning, _, err := f.S.CreateTaskSubscription(ctx, running.ID, ns, testPayload)
	if err != nil {
		t.Fatal(err)
	}
	f.endSucceeded(l)
	f.fanOutAll()
	if got := f.deliveredEvents(subDone); len(got) != 1 {
		t.Errorf("finished task's subscription after fan-out: %v (the backfilled event twice?)", got)
	}
	if got, want := f.deliveredEvents(subRunning), []string{running.TaskNo + " task.succeeded"}; !slices.Equal(got, want) {
		t.Errorf("running task's subscription: %v, want %v", got, want)
	}
	// The same URL again (an idempotent resubmit) returns the first subscription.
	again, created, err := f.S.CreateTaskSubscription(ctx, done.ID, ns, testPayload)
	if err != nil || created || again.SubNo != subDone.SubNo {
		t.Fatalf("resubmit: created=%v sub=%v err=%v", created, again, err)
	}
}

func TestDeliveryClaimFencesAndCapsPerSubscription(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sub := f.succeededWithDeliveries(5)

	got, err := f.S.ClaimDeliveries(ctx, 10, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("claimed %d, want 2 (the per-subscription cap)", len(got))
	}
	if got[0].URL != sub.URL || got[0].Secret != sub.Secret || got[0].Attempts != 1 || got[0].State != webhooks.DeliverySending {
		t.Fatalf("claimed delivery: %+v", got[0])
	}
	if more, _ := f.S.ClaimDeliveries(ctx, 10, 2, time.Minute); len(more) != 0 {
		t.Fatalf("claimed %d more while the subscription has 2 in flight", len(more))
	}
	// A failure schedules the next attempt; the lease holder's write lands once.
	next := time.Now().Add(-time.Second)
	d, ok, err := f.S.RecordAttempt(ctx, &got[0].Delivery, webhooks.AttemptResult{StatusCode: 500, Latency: 12 * time.Millisecond, Error: "HTTP 500", NextAt: next})
	if err != nil || !ok || d.State != webhooks.DeliveryPending || d.LastStatus == nil || *d.LastStatus != 500 {
		t.Fatalf("record failure: %+v %v %v", d, ok, err)
	}
	if _, ok, _ := f.S.RecordAttempt(ctx, &got[0].Delivery, webhooks.AttemptResult{Delivered: true, StatusCode: 200}); ok {
		t.Fatal("a second write of the same attempt landed")
	}
	// A lapsed lease is claimed again, and the old holder's write is refused.
	f.Exec("UPDATE webhook_deliveries SET due_at = now() - interval '1 second' WHERE id = ?", got[1].ID)
	again, err := f.S.ClaimDeliveries(ctx, 10, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var reclaimed *webhooks.Outgoing
	for i := range again {
		if again[i].ID == got[1].ID {
			reclaimed = &again[i]
		}
	}
	if reclaimed == nil || reclaimed.Attempts != 2 {
		t.Fatalf("lapsed lease not reclaimed: %+v", again)
	}
	if _, ok, _ := f.S.RecordAttempt(ctx, &got[1].Delivery, webhooks.AttemptResult{Delivered: true, StatusCode: 200}); ok {
		t.Fatal("the lapsed holder's write landed")
	}
	d, ok, err = f.S.RecordAttempt(ctx, &reclaimed.Delivery, webhooks.AttemptResult{Error: "gave up"})
	if err != nil || !ok || d.State != webhooks.DeliveryDead {
		t.Fatalf("give up: %+v %v %v", d, ok, err)
	}
	atts, err := f.S.DeliveryAttempts(ctx, []int64{got[0].ID, got[1].ID})
	if err != nil || len(atts[got[0].ID]) != 1 || len(atts[got[1].ID]) != 1 || atts[got[1].ID][0].Attempt != 2 {
		t.Fatalf("attempts: %+v %v", atts, err)
	}
	// Redeliver brings a dead delivery back at once.
	r, err := f.S.Redeliver(ctx, sub.ID, reclaimed.DeliveryNo)
	if err != nil || r.State != webhooks.DeliveryPending {
		t.Fatalf("redeliver: %+v %v", r, err)
	}
	if _, err := f.S.Redeliver(ctx, sub.ID+1000, reclaimed.DeliveryNo); err != webhooks.ErrDeliveryNotFound {
		t.Fatalf("redeliver through another subscription: %v", err)
	}
}

func TestSubscriptionsAreScopedToTheirOwner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := f.subscribe("alice", terminalEvents...)
	f.subscribe("bob", terminalEvents...)
	if _, err := f.S.GetSubscription(ctx, a.SubNo, pg.Scope{Owner: "bob"}); err != webhooks.ErrSubscriptionNotFound {
		t.Fatalf("bob sees alice's subscription: %v", err)
	}
	if err := f.S.DeleteSubscription(ctx, a.SubNo, pg.Scope{Owner: "bob"}); err != webhooks.ErrSubscriptionNotFound {
		t.Fatalf("bob deletes alice's subscription: %v", err)
	}
	mine, _ := f.S.ListSubscriptions(ctx, pg.Scope{Owner: "alice"}, "bob", 10)
	all, _ := f.S.ListSubscriptions(ctx, pg.Scope{Owner: "ops", Admin: true}, "", 10)
	if len(mine) != 1 || mine[0].Owner != "alice" || len(all) != 2 {
		t.Fatalf("alice lists %d, admin lists %d", len(mine), len(all))
	}
	if !slices.Equal(mine[0].Events, terminalEvents) {
		t.Fatalf("events read back as %v", mine[0].Events)
	}
	if err := f.S.DeleteSubscription(ctx, a.SubNo, pg.Scope{Owner: "ops", Admin: true}); err != nil {
		t.Fatal(err)
	}
}

func TestPruneDeliveriesKeepsUnfinishedOnes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sub := f.succeededWithDeliveries(3)
	f.Exec("UPDATE webhook_deliveries SET updated_at = now() - interval '8 days'")
	f.Exec("UPDATE webhook_deliveries SET state = 'delivered' WHERE id IN (SELECT id FROM webhook_deliveries ORDER BY id LIMIT 2)")
	n, err := f.S.PruneDeliveries(ctx, 7*24*time.Hour, 100)
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
		task := f.Task()
		ns := newSubscription("alice", want...)
		start := make(chan struct{})
		var sub *webhooks.Subscription
		var subErr, runErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
			sub, _, subErr = f.S.CreateTaskSubscription(ctx, task.ID, ns, testPayload)
		})
		wg.Go(func() {
			<-start
			c, err := f.S.ClaimTask(ctx, task.ID, "w1", time.Minute)
			if err != nil {
				runErr = err
				return
			}
			_, runErr = f.S.EndFinished(ctx, c.Lease, store.Outcome{Status: store.StatusSuccess})
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

// payloadSequence reads the sequence testPayload put in a delivery's body (0: none).
func payloadSequence(payload json.RawMessage) int64 {
	var p struct {
		Sequence int64 `json:"sequence"`
	}
	json.Unmarshal(payload, &p) //nolint:errcheck // no sequence reads as 0
	return p.Sequence
}

func sequenceOf(t *testing.T, payload json.RawMessage) int64 {
	t.Helper()
	seq := payloadSequence(payload)
	if seq == 0 {
		t.Fatalf("payload %s has no sequence", payload)
	}
	return seq
}

// claimedNames lists a claim's deliveries as "<task's name> <event>", sorted.
func claimedNames(out []webhooks.Outgoing, names map[string]string) []string {
	var got []string
	for _, o := range out {
		got = append(got, names[o.TaskNo]+" "+o.Event)
	}
	slices.Sort(got)
	return got
}

// A task's deliveries to a subscription go one at a time, in the order of its events: the
// next is not attempted while the one before is retrying (nor while its lease runs, nor when
// it was given up on too early), and is attempted at once when the one before is delivered or
// dead. Another task's deliveries to the same subscription are not held back. Each body
// carries the event's sequence among its task's events, counting events the subscription
// does not hear of.
func TestDeliveriesOfATaskGoOutInEventOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sub := f.subscribe("alice", store.EventStarted, store.EventRetryScheduled, store.EventSucceeded)
	a, b := f.Task(), f.Task()
	names := map[string]string{a.TaskNo: "A", b.TaskNo: "B"}
	// A: submitted (not heard of), started, retry scheduled, started, succeeded.
	l := f.Claim(a, "w1")
	if _, err := f.S.EndRetryWait(ctx, l, "transient", "db blip", 0); err != nil {
		t.Fatal(err)
	}
	f.succeed(a)
	// B: submitted (not heard of), started, succeeded.
	f.succeed(b)
	if got := f.fanOutAll(); got != 6 {
		t.Fatalf("%d deliveries, want 6", got)
	}
	ds, err := f.S.Deliveries(ctx, sub.ID, webhooks.DeliveryFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	byEvent := map[string]int64{}
	for _, d := range ds {
		byEvent[fmt.Sprintf("%s %d", names[d.TaskNo], d.EventID)] = sequenceOf(t, d.Payload)
	}
	seqs := func(task string) []int64 {
		var out []int64
		for _, d := range slices.Backward(ds) { // oldest first: event order
			if names[d.TaskNo] == task {
				out = append(out, byEvent[fmt.Sprintf("%s %d", task, d.EventID)])
			}
		}
		return out
	}
	if got := seqs("A"); !slices.Equal(got, []int64{2, 3, 4, 5}) {
		t.Fatalf("A's sequences %v, want [2 3 4 5] (1 is its submission, which the subscription does not hear of)", got)
	}
	if got := seqs("B"); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("B's sequences %v, want [2 3]", got)
	}

	claim := func(want ...string) []webhooks.Outgoing {
		t.Helper()
		out, err := f.S.ClaimDeliveries(ctx, 10, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(want)
		if got := claimedNames(out, names); !slices.Equal(got, want) {
			t.Fatalf("claimed %q, want %q", got, want)
		}
		return out
	}
	record := func(o webhooks.Outgoing, r webhooks.AttemptResult) {
		t.Helper()
		if _, ok, err := f.S.RecordAttempt(ctx, &o.Delivery, r); err != nil || !ok {
			t.Fatalf("record %s: ok=%v err=%v", o.DeliveryNo, ok, err)
		}
	}
	failed := func(next time.Time) webhooks.AttemptResult {
		return webhooks.AttemptResult{StatusCode: 503, Error: "HTTP 503", NextAt: next}
	}
	delivered := webhooks.AttemptResult{StatusCode: 204, Delivered: true}

	// Only the first delivery of each task.
	out := claim("A task.started", "B task.started")
	aStarted, bStarted := out[0], out[1]
	if names[aStarted.TaskNo] != "A" {
		aStarted, bStarted = bStarted, aStarted
	}
	// A's first fails and waits an hour: B goes on, A's later deliveries wait, and are not
	// even due before A's first is tried again.
	record(aStarted, failed(time.Now().Add(time.Hour)))
	record(bStarted, delivered)
	out = claim("B task.succeeded")
	if n := f.Count(`SELECT count(*) FROM webhook_deliveries WHERE task_no = ? AND state = 'pending' AND due_at <= now()`, a.TaskNo); n != 0 {
		t.Fatalf("%d of A's held-back deliveries are due while the one before waits an hour", n)
	}
	claim()
	record(out[0], delivered)
	claim()

	// A's first is due again (as if the hour had passed): it alone goes, and when its lease
	// lapses it is taken again, still before the next.
	f.Exec(`UPDATE webhook_deliveries SET due_at = now() - interval '1 second' WHERE id = ?`, aStarted.ID)
	out = claim("A task.started")
	f.Exec(`UPDATE webhook_deliveries SET due_at = now() - interval '1 second' WHERE id = ?`, aStarted.ID)
	out = claim("A task.started")
	if out[0].Attempts != 3 {
		t.Fatalf("the lapsed lease's delivery is on attempt %d, want 3", out[0].Attempts)
	}
	// Delivered: the next goes at once, though it had been put off to the hour.
	record(out[0], delivered)
	out = claim("A task.retry_scheduled")
	// Given up on (dead): the next goes.
	record(out[0], webhooks.AttemptResult{Error: "gave up"})
	out = claim("A task.started")
	record(out[0], delivered)
	out = claim("A task.succeeded")
	if sequenceOf(t, out[0].Payload) != 5 {
		t.Fatalf("the last delivery's body %s", out[0].Payload)
	}
	record(out[0], delivered)
	claim()

	// A later event fanned out while the task's earlier delivery waits for its retry is not
	// due before that retry either.
	c := f.Task()
	names[c.TaskNo] = "C"
	l = f.Claim(c, "w1")
	f.fanOutAll()
	out = claim("C task.started")
	record(out[0], failed(time.Now().Add(time.Hour)))
	f.endSucceeded(l)
	if got := f.fanOutAll(); got != 1 {
		t.Fatalf("%d deliveries for C's success", got)
	}
	if n := f.Count(`SELECT count(*) FROM webhook_deliveries WHERE task_no = ? AND state = 'pending' AND due_at <= now()`, c.TaskNo); n != 0 {
		t.Fatalf("C's success is due while its start waits an hour")
	}
	claim()
}

// The claim's order holds against what other dispatchers are doing at the same moment:
//   - another dispatcher's fan-out holds a task's earlier event (locked, not yet marked) while
//     this one fans out the later one: the later delivery exists first, and waits;
//   - another dispatcher is writing the earlier delivery's result (delivered, not committed):
//     the later one waits for the commit;
//   - another claim holds the earlier delivery's row (taking it, not committed) while this
//     claim runs: this claim waits for the row, then skips it, and takes neither it nor the
//     later one.
func TestClaimOrderHoldsAgainstConcurrentDispatchers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.subscribe("alice", store.EventStarted, store.EventSucceeded)
	task := f.Task()
	f.succeed(task)
	started := f.Count(`SELECT id FROM task_events WHERE task_id = ? AND event = 'task.started'`, task.ID)
	names := map[string]string{task.TaskNo: "T"}
	claim := func(want ...string) []webhooks.Outgoing {
		t.Helper()
		out, err := f.S.ClaimDeliveries(ctx, 10, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := claimedNames(out, names); !slices.Equal(got, want) {
			t.Fatalf("claimed %q, want %q", got, want)
		}
		return out
	}

	// Another fan-out holds task.started.
	other, err := f.DB.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Rollback() }) //nolint:errcheck // done already when the test passes
	if _, err := other.ExecContext(ctx, `SELECT id FROM task_events WHERE id = $1 FOR UPDATE`, started); err != nil {
		t.Fatal(err)
	}
	if n, d, err := f.S.FanOut(ctx, 100, testPayload); err != nil || n != 1 || d != 1 {
		t.Fatalf("fan-out beside the held event: events=%d deliveries=%d err=%v; want the later event alone", n, d, err)
	}
	claim() // task.succeeded's delivery exists, task.started's does not yet
	if err := other.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := f.fanOutAll(); got != 1 {
		t.Fatalf("fan-out of the released event created %d deliveries", got)
	}
	out := claim("T task.started")
	first := out[0]

	// Another dispatcher is recording the first as delivered, not committed yet.
	writer, err := f.DB.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Rollback() }) //nolint:errcheck // done already when the test passes
	if _, err := writer.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now() WHERE id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}
	claim()
	if err := writer.Commit(); err != nil {
		t.Fatal(err)
	}
	out = claim("T task.succeeded")
	f.Exec(`UPDATE webhook_deliveries SET state = 'delivered' WHERE id = ?`, out[0].ID)

	// Two deliveries of another task, the first being taken by another claim.
	next := f.Task()
	names[next.TaskNo] = "U"
	f.succeed(next)
	f.fanOutAll()
	uStarted := f.Count(`SELECT id FROM webhook_deliveries WHERE task_no = ? AND event = 'task.started'`, next.TaskNo)
	taker, err := f.DB.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taker.Rollback() }) //nolint:errcheck // done already when the test passes
	var takerPID int
	if err := taker.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&takerPID); err != nil {
		t.Fatal(err)
	}
	if _, err := taker.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'sending', attempts = attempts + 1,
		due_at = now() + interval '1 minute' WHERE id = $1`, uStarted); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out []webhooks.Outgoing
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := f.S.ClaimDeliveries(ctx, 10, 10, time.Minute)
		done <- result{out, err}
	}()
	testenv.Eventually(t, 30*time.Second, "the claim to wait for the row the other claim holds", func() bool {
		return f.Count(`SELECT count(*) FROM pg_stat_activity WHERE ? = ANY (pg_blocking_pids(pid))`, takerPID) > 0
	})
	if err := taker.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := claimedNames(r.out, names); len(got) != 0 {
		t.Fatalf("the claim beside another one holding U's first delivery took %q", got)
	}
	claim() // U's first is in flight (the other claim's)
	f.Exec(`UPDATE webhook_deliveries SET state = 'delivered' WHERE id = ?`, uStarted)
	claim("U task.succeeded")
}

// Several dispatchers claiming at once, each attempt failing (due again at once), delivered
// or given up on at random: no two attempts of one task's deliveries to a subscription are
// ever in flight together, and each task's deliveries are taken in event order.
func TestConcurrentClaimsNeverHoldTwoEventsOfOneTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	every := []string{store.EventSubmitted, store.EventStarted, store.EventSucceeded}
	f.subscribe("alice", every...)
	f.subscribe("alice", every...)
	for range 12 {
		f.succeed(f.Task())
	}
	if got := f.fanOutAll(); got != 72 {
		t.Fatalf("%d deliveries, want 72 (12 tasks × 3 events × 2 subscriptions)", got)
	}

	type key struct {
		sub  int64
		task string
	}
	var (
		mu       sync.Mutex
		inFlight = map[key]string{} // the delivery being attempted
		nextSeq  = map[key]int64{}  // the sequence the next claim of the task must have
		failures []string
		attempts int
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	deadline := time.Now().Add(2 * time.Minute)
	var wg sync.WaitGroup
	for picker := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(picker), 7))
			for time.Now().Before(deadline) {
				out, err := f.S.ClaimDeliveries(ctx, 3, 8, time.Minute)
				if err != nil {
					fail("picker %d: %v", picker, err)
					return
				}
				if len(out) == 0 {
					var left int
					if err := f.DB.DB.QueryRowContext(ctx, `SELECT count(*) FROM webhook_deliveries WHERE state IN ('pending', 'sending')`).Scan(&left); err != nil {
						fail("picker %d: %v", picker, err)
						return
					}
					if left == 0 {
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				for _, o := range out {
					k := key{o.SubscriptionID, o.TaskNo}
					if other, busy := inFlight[k]; busy {
						failures = append(failures, fmt.Sprintf("%s (%s) claimed while %s of the same task and subscription is in flight", o.DeliveryNo, o.Event, other))
					}
					inFlight[k] = o.DeliveryNo
					want := nextSeq[k]
					if want == 0 {
						want = 1
					}
					if seq := payloadSequence(o.Payload); seq != want {
						failures = append(failures, fmt.Sprintf("%s claimed with sequence %d; the task's next undelivered one is %d", o.DeliveryNo, seq, want))
					}
				}
				attempts += len(out)
				mu.Unlock()
				for _, o := range out {
					time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond) // the attempt
					var r webhooks.AttemptResult
					switch n := rng.IntN(20); {
					case n < 10:
						r = webhooks.AttemptResult{Error: "no answer", NextAt: time.Now()}
					case n < 17:
						r = webhooks.AttemptResult{StatusCode: 204, Delivered: true}
					default:
						r = webhooks.AttemptResult{Error: "gave up"}
					}
					// The attempt ends before its result commits: a claim of the next one
					// after this point is the rule's to refuse until the commit.
					k := key{o.SubscriptionID, o.TaskNo}
					mu.Lock()
					delete(inFlight, k)
					if r.NextAt.IsZero() {
						nextSeq[k] = payloadSequence(o.Payload) + 1
					}
					mu.Unlock()
					if _, ok, err := f.S.RecordAttempt(ctx, &o.Delivery, r); err != nil || !ok {
						fail("record %s: ok=%v err=%v", o.DeliveryNo, ok, err)
						return
					}
				}
			}
			fail("picker %d: deliveries still unfinished after two minutes", picker)
		})
	}
	wg.Wait()
	for _, msg := range failures {
		t.Error(msg)
	}
	for k, seq := range nextSeq {
		if seq != 4 {
			t.Errorf("task %s, subscription %d: finished up to sequence %d, want 3", k.task, k.sub, seq-1)
		}
	}
	t.Logf("%d attempts by 4 concurrent pickers", attempts)
}
