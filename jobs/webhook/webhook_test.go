package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/client"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/jobs/webhook/webhooktest"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

const secret = "whsec_test_secret_0123456789"

// receiver is a webhook endpoint that can go down (Stop) and come back on the same address
// (Start).
type receiver struct {
	*webhooktest.Endpoint
	handler http.HandlerFunc

	mu       sync.Mutex
	received map[string]int // event id → deliveries
	bad      int            // deliveries with a bad signature
	bodies   map[string]client.WebhookEvent
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{received: map[string]int{}, bodies: map[string]client.WebhookEvent{}}
	r.handler = func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		ev, err := client.ParseWebhook(secret, req, body, 5*time.Minute)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil || ev.ID != req.Header.Get("Taskcenter-Event-Id") {
			r.bad++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.received[ev.ID]++
		r.bodies[ev.ID] = *ev
		w.WriteHeader(http.StatusNoContent)
	}
	r.Endpoint = webhooktest.NewEndpoint(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.handler(w, req) }))
	return r
}

func (r *receiver) url() string { return r.URL("/hook") }

func (r *receiver) snapshot() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.received {
		out[k] = v
	}
	return out, r.bad
}

type fixture struct {
	t  *testing.T
	pg *storetest.Postgres
	st *store.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pg := storetest.NewPostgres(t)
	return &fixture{t: t, pg: pg, st: store.New(pg.DB)}
}

// finish creates a task and runs it to SUCCESS through the real transitions.
func (f *fixture) finish(owner string) *store.Task {
	f.t.Helper()
	ctx := context.Background()
	task, _, err := f.st.Create(ctx, store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "bench:noop", Owner: owner, Queue: "bench", MaxRetry: 1, TimeoutSeconds: 60})
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := f.st.ClaimTask(ctx, task.ID, "w1", time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.st.EndFinished(ctx, c.Lease, store.Outcome{Status: store.StatusSuccess}); err != nil {
		f.t.Fatal(err)
	}
	return task
}

func (f *fixture) subscribe(owner, url string, events ...string) *webhooks.Subscription {
	f.t.Helper()
	sub, err := f.st.CreateSubscription(context.Background(), webhooks.NewSubscription{Owner: owner, URL: url, Events: events, Secret: secret, CreatedBy: owner})
	if err != nil {
		f.t.Fatal(err)
	}
	return sub
}

type alerts struct {
	testenv.Collector[webhook.Dead]
}

func (a *alerts) WebhookDead(_ context.Context, d webhook.Dead) { a.Add(d) }

func (a *alerts) count() int { return a.Len() }

func (f *fixture) dispatcher(cfg webhook.Config, allowed []string, al webhook.Alerter) *webhook.Dispatcher {
	f.t.Helper()
	p, err := webhook.NewPolicy(allowed)
	if err != nil {
		f.t.Fatal(err)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase, cfg.RetryMax = 100*time.Millisecond, time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	d := webhook.New(cfg, webhook.Deps{Store: f.st, Policy: p, Alerter: al, Logger: slog.New(slog.DiscardHandler)})
	d.Start()
	f.t.Cleanup(d.Stop)
	return d
}

// A receiver that is down for 10 s gets every event once it is back: none lost, each validly
// signed, and none for a transition that rolled back.
func TestReceiverDownForTenSecondsGetsEveryEventOnceBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rcv := newReceiver(t)
	f.subscribe("alice", rcv.url(), webhook.TerminalEvents...)
	f.dispatcher(webhook.Config{}, []string{"127.0.0.1"}, nil)

	rcv.Stop()
	down := time.Now()
	var want []string
	for range 20 {
		f.finish("alice")
	}
	// A transition whose transaction rolls back leaves no event, so nothing is sent for it.
	ctx := context.Background()
	rolled := f.finishRolledBack()
	// Deliveries are being attempted (and failing) while the receiver is down.
	testenv.Eventually(t, 10*time.Second, "failed attempts while the receiver is down", func() bool {
		var n int
		f.pg.DB.QueryRowContext(ctx, `SELECT count(*) FROM webhook_attempts WHERE status_code IS NULL`).Scan(&n) //nolint:errcheck
		return n >= 20
	})
	time.Sleep(time.Until(down.Add(10 * time.Second)))
	rcv.Start()

	rows, err := f.pg.DB.QueryContext(ctx, `SELECT id FROM task_events WHERE event = 'task.succeeded' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id) //nolint:errcheck
		want = append(want, webhook.EventID(id))
	}
	rows.Close()
	testenv.Eventually(t, 30*time.Second, "every event delivered after the receiver came back", func() bool {
		got, _ := rcv.snapshot()
		return len(got) == len(want)
	})
	got, bad := rcv.snapshot()
	if bad != 0 {
		t.Errorf("%d deliveries had a bad signature", bad)
	}
	for _, id := range want {
		if got[id] == 0 {
			t.Errorf("event %s never arrived", id)
		}
	}
	if len(got) != 20 || len(want) != 20 {
		t.Fatalf("received %d distinct events, outbox has %d; want 20 each", len(got), len(want))
	}
	for _, ev := range rcv.bodies {
		if ev.Task.ID == rolled {
			t.Fatalf("an event arrived for %s, whose transition rolled back", rolled)
		}
		if ev.Type != "task.succeeded" || ev.Status != "SUCCESS" || ev.Task.Status != "SUCCESS" || ev.Task.Links.Self == "" {
			t.Fatalf("event body %+v", ev)
		}
	}
}

// finishRolledBack makes a task's success in a transaction (status and outbox row, as a
// transition writes them) and rolls it back. It returns the task's number.
func (f *fixture) finishRolledBack() string {
	f.t.Helper()
	ctx := context.Background()
	task, _, err := f.st.Create(ctx, store.NewTask{TaskNo: "tsk_" + rand.Text(), Type: "bench:noop", Owner: "alice", Queue: "bench", MaxRetry: 1, TimeoutSeconds: 60})
	if err != nil {
		f.t.Fatal(err)
	}
	tx, err := f.pg.DB.BeginTx(ctx, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, `WITH t AS (UPDATE tasks SET status = 'SUCCESS' WHERE id = ? RETURNING *)
		INSERT INTO task_events (task_id, task_no, owner, task_type, event, status, attempt, actor)
		SELECT id, task_no, owner, type, 'task.succeeded', status, attempt, 'test' FROM t`, task.ID); err != nil {
		f.t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // several dispatcher rounds while it is uncommitted
	return task.TaskNo
}

// A receiver that never answers holds only its own deliveries: other subscriptions are
// served, and task transitions (the workers' writes) never wait on it.
func TestSlowReceiverBlocksNeitherWorkersNorOtherReceivers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	slow := newReceiver(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	slow.handler = func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}
	fast := newReceiver(t)
	f.subscribe("alice", slow.url(), webhook.TerminalEvents...)
	f.subscribe("alice", fast.url(), webhook.TerminalEvents...)
	f.dispatcher(webhook.Config{Concurrency: 4, PerSubscription: 2, Timeout: 5 * time.Second}, []string{"127.0.0.1"}, nil)

	start := time.Now()
	for range 10 {
		f.finish("alice")
	}
	took := time.Since(start)
	testenv.Eventually(t, 4*time.Second, "the fast receiver served while the slow one hangs", func() bool {
		got, _ := fast.snapshot()
		return len(got) == 10
	})
	got, _ := slow.snapshot()
	if len(got) != 0 {
		t.Fatalf("the hanging receiver answered %d", len(got))
	}
	t.Logf("10 tasks finished in %s while a receiver hung", took)
}

// After its window a delivery is dead and one alert is raised, however many rounds pass.
func TestDeliveryGoesDeadWithOneAlert(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rcv := newReceiver(t)
	rcv.handler = func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusInternalServerError) }
	sub := f.subscribe("alice", rcv.url(), webhook.TerminalEvents...)
	al := &alerts{}
	f.dispatcher(webhook.Config{MaxAge: 700 * time.Millisecond}, []string{"127.0.0.1"}, al)
	f.finish("alice")
	testenv.Eventually(t, 10*time.Second, "the delivery to go dead", func() bool { return al.count() == 1 })
	time.Sleep(300 * time.Millisecond)
	if al.count() != 1 {
		t.Fatalf("%d alerts, want 1", al.count())
	}
	ds, err := f.st.Deliveries(context.Background(), sub.ID, webhooks.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 1 || ds[0].State != webhooks.DeliveryDead || ds[0].Attempts < 2 || *ds[0].LastStatus != 500 {
		t.Fatalf("deliveries: %+v %v", ds, err)
	}
	// Redelivered, it is tried again; this time the receiver accepts.
	rcv.handler = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
	if _, err := f.st.Redeliver(context.Background(), sub.ID, ds[0].DeliveryNo); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the redelivery to land", func() bool {
		ds, _ := f.st.Deliveries(context.Background(), sub.ID, webhooks.DeliveryFilter{Limit: 10})
		return len(ds) == 1 && ds[0].State == webhooks.DeliveryDelivered
	})
}

// Redirects are not followed: a 3xx is a failed attempt, and its target is never reached.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	target := newReceiver(t)
	redirect := newReceiver(t)
	redirect.handler = func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.url(), http.StatusTemporaryRedirect)
	}
	sub := f.subscribe("alice", redirect.url(), webhook.TerminalEvents...)
	f.dispatcher(webhook.Config{}, []string{"127.0.0.1"}, nil)
	f.finish("alice")
	e := f.waitLastError(sub)
	if !strings.HasPrefix(e, "HTTP 307") {
		t.Errorf("redirect error %q", e)
	}
	if got, _ := target.snapshot(); len(got) != 0 {
		t.Fatalf("the redirect target was reached: %v", got)
	}
}

// An address is checked when it is dialled: a host allowed by name that resolves to
// loopback (as after DNS rebinding) is refused at connect time, even though the subscription
// got past the API.
func TestAddressIsCheckedAtDialTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	target := newReceiver(t)
	_, port, _ := net.SplitHostPort(target.Addr())
	// Written straight to the store: the API's subscription check would refuse it.
	sub := f.subscribe("alice", "http://localhost:"+port+"/hook", webhook.TerminalEvents...)
	f.dispatcher(webhook.Config{}, []string{"localhost"}, nil)
	f.finish("alice")
	e := f.waitLastError(sub)
	if !strings.HasPrefix(e, "refused:") || !strings.Contains(e, "loopback") {
		t.Errorf("dial-time refusal %q", e)
	}
	if got, _ := target.snapshot(); len(got) != 0 {
		t.Fatalf("the loopback receiver was reached: %v", got)
	}
}

// waitLastError waits for the subscription's delivery to fail and returns its error.
func (f *fixture) waitLastError(sub *webhooks.Subscription) string {
	f.t.Helper()
	var last string
	testenv.Eventually(f.t, 5*time.Second, "the delivery to fail", func() bool {
		ds, _ := f.st.Deliveries(context.Background(), sub.ID, webhooks.DeliveryFilter{Limit: 1})
		if len(ds) == 1 {
			last = ds[0].LastError
		}
		return last != ""
	})
	return last
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	p, err := webhook.NewPolicy([]string{"hooks.example.com", "*.partner.test", "127.0.0.1", "10.20.0.0/16", "203.0.113.9"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:9000/hook", true},
		{"http://10.20.3.4/hook", true},
		{"https://203.0.113.9/x", true},
		{"http://127.0.0.2/hook", false},             // loopback, not listed
		{"http://10.21.0.1/hook", false},             // private, outside the range
		{"http://169.254.169.254/latest/", false},    // cloud metadata
		{"http://[::1]/hook", false},                 // loopback v6
		{"http://[::ffff:127.0.0.2]/hook", false},    // v4-mapped loopback
		{"http://198.51.100.1/hook", false},          // public but not listed
		{"http://evil.example.com/hook", false},      // not listed
		{"http://user:pw@hooks.example.com/", false}, // credentials
		{"ftp://hooks.example.com/", false},          // scheme
		{"http://localhost/hook", false},             // not listed (and loopback)
		{"http://a.partner.test.evil.com/", false},   // suffix trick
		{"/relative", false},
	} {
		err := p.CheckURL(ctx, tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err=%v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && !errors.Is(err, webhook.ErrNotAllowed) {
			t.Errorf("%s: %v is not ErrNotAllowed", tc.url, err)
		}
	}
	empty, _ := webhook.NewPolicy(nil)
	if err := empty.CheckURL(ctx, "http://127.0.0.1/hook"); err == nil {
		t.Error("the default (empty) policy allowed loopback")
	}
	loopbackByName, _ := webhook.NewPolicy([]string{"localhost"})
	if err := loopbackByName.CheckURL(ctx, "http://localhost/hook"); err == nil {
		t.Error("a name entry let a webhook reach loopback")
	}
	if _, err := webhook.NewPolicy([]string{"10.0.0.0/33"}); err == nil {
		t.Error("a bad range was accepted")
	}
}

// The signature the dispatcher writes verifies with the client's VerifySignature (the
// README's Go snippet), and a tampered body or an old timestamp does not.
func TestSignatureVerifies(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","type":"task.succeeded"}`)
	now := time.Now()
	h := webhook.Sign(secret, now, body)
	if err := client.VerifySignature(secret, h, body, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := client.VerifySignature(secret, h, append(body, ' '), 5*time.Minute); !errors.Is(err, client.ErrBadSignature) {
		t.Fatalf("tampered body: %v", err)
	}
	if err := client.VerifySignature("other-secret", h, body, 5*time.Minute); !errors.Is(err, client.ErrBadSignature) {
		t.Fatalf("wrong secret: %v", err)
	}
	old := webhook.Sign(secret, now.Add(-6*time.Minute), body)
	if err := client.VerifySignature(secret, old, body, 5*time.Minute); !errors.Is(err, client.ErrStaleSignature) {
		t.Fatalf("replay: %v", err)
	}
	var ev client.WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != "evt_1" {
		t.Fatal(ev, err)
	}
}

// A task's events reach a subscription in order, with their sequence, and without waiting a
// poll interval each: the end of one delivery lets the dispatcher claim the task's next at
// once. The poll interval here is an hour, so after the first round only those wake-ups
// move anything.
func TestATasksEventsArriveInOrderWithoutAPollEach(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rcv := newReceiver(t)
	var arrived testenv.Collector[client.WebhookEvent]
	rcv.handler = func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		ev, err := client.ParseWebhook(secret, req, body, 5*time.Minute)
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		arrived.Add(*ev)
		w.WriteHeader(http.StatusNoContent)
	}
	f.subscribe("alice", rcv.url(), store.EventSubmitted, store.EventStarted, store.EventSucceeded)
	var tasks []*store.Task
	for range 3 {
		tasks = append(tasks, f.finish("alice"))
	}
	f.dispatcher(webhook.Config{PollInterval: time.Hour}, []string{"127.0.0.1"}, nil)
	testenv.Eventually(t, 30*time.Second, "all nine events", func() bool { return arrived.Len() >= 9 })
	events := arrived.Since(0)
	for _, task := range tasks {
		var got []string
		for _, ev := range events {
			if ev.Task.ID == task.TaskNo {
				got = append(got, fmt.Sprintf("%d %s", ev.Sequence, ev.Type))
			}
		}
		want := []string{"1 task.submitted", "2 task.started", "3 task.succeeded"}
		if !slices.Equal(got, want) {
			t.Errorf("task %s: arrived %q, want %q", task.TaskNo, got, want)
		}
	}
}
