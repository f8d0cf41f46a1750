package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/client"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs/webhook/webhooktest"
)

// hookReceiver is a webhook endpoint that verifies each delivery with the documented Go
// snippet (client.ParseWebhook) and can be killed (Stop) and started again on the same
// address (Start).
type hookReceiver struct {
	*webhooktest.Endpoint
	secret string

	mu       sync.Mutex
	ids      map[string]int // event id → deliveries received
	tasks    map[string]string
	arrivals []client.WebhookEvent // every validly signed delivery, in the order it arrived
	delay    time.Duration         // how long the receiver takes to answer once it has the event
	bad      int
	total    int
	lastBody []byte
	lastSig  string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	r := &hookReceiver{ids: map[string]int{}, tasks: map[string]string{}}
	r.Endpoint = webhooktest.NewEndpoint(t, r)
	return r
}

func (r *hookReceiver) url() string { return r.URL("/taskcenter") }

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	r.mu.Lock()
	r.total++
	ev, err := client.ParseWebhook(r.secret, req, body, 5*time.Minute)
	if err != nil || ev.ID != req.Header.Get("Taskcenter-Event-Id") {
		r.bad++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.ids[ev.ID]++
	r.tasks[ev.ID] = ev.Task.ID
	r.arrivals = append(r.arrivals, *ev)
	r.lastBody, r.lastSig = body, req.Header.Get("Taskcenter-Signature")
	delay := r.delay
	r.mu.Unlock()
	// A slow receiver has taken the event in already (as a real one would have acted on it)
	// when its answer comes late, perhaps after the sender gave up: that is what makes
	// at-least-once delivery send it again.
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *hookReceiver) setDelay(d time.Duration) {
	r.mu.Lock()
	r.delay = d
	r.mu.Unlock()
}

func (r *hookReceiver) seen() (distinct, total, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids), r.total, r.bad
}

// webhookEnv is an env whose server may send webhooks to 127.0.0.1, with short retries.
func webhookEnv(t *testing.T) *env {
	return newEnv(t, map[string]string{
		"TASKCENTER_TYPES_BENCH_NOOP_DISABLED": "false",
		"TASKCENTER_WEBHOOKS_ALLOWED_HOSTS":    "127.0.0.1",
		"TASKCENTER_WEBHOOKS_RETRY_BASE":       "200ms",
		"TASKCENTER_WEBHOOKS_RETRY_MAX":        "2s",
		"TASKCENTER_WEBHOOKS_POLL_INTERVAL":    "100ms",
	})
}

// subscribe creates alice's subscription to rcv through the API (to the given events, or the
// endings when none are named) and keeps its secret.
func (p *proc) subscribe(rcv *hookReceiver, events ...string) client.Webhook {
	p.t.Helper()
	req := map[string]any{"url": rcv.url()}
	if len(events) > 0 {
		req["events"] = events
	}
	res := p.do("POST", "/api/v1/webhooks", aliceToken, req)
	if res.status == http.StatusUnprocessableEntity && strings.Contains(string(res.body), "webhooks.allowed_hosts") {
		p.t.Skip("the server does not read webhooks.allowed_hosts yet (internal/config has no webhooks section): " + string(res.body))
	}
	if res.status != http.StatusCreated {
		p.t.Fatalf("subscribe: %d %s", res.status, res.body)
	}
	var hook client.Webhook
	res.json(p.t, &hook)
	rcv.mu.Lock()
	rcv.secret = hook.Secret
	rcv.mu.Unlock()
	return hook
}

// Kill the receiver, finish 100 tasks, start it again: it receives
// exactly 100 distinct event ids, each validly signed.
func TestWebhooksReceiverRestartGetsExactlyTheHundredEvents(t *testing.T) {
	t.Parallel()
	e := webhookEnv(t)
	p := e.start("all")
	rcv := newHookReceiver(t)
	hook := p.subscribe(rcv)
	c, err := client.New(p.base, aliceToken, client.WithHTTPClient(p.client))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	rcv.Stop()
	submitted := map[string]bool{}
	for i := range 100 {
		sub, err := c.Submit(ctx, "bench:noop", map[string]any{"note": fmt.Sprint(i)}, client.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		submitted[sub.Task.ID] = true
	}
	testenv.Eventually(t, 60*time.Second, "100 tasks to finish", func() bool {
		return e.count(`SELECT count(*) FROM tasks WHERE type = 'bench:noop' AND status = 'SUCCESS'`) == 100
	})
	testenv.Eventually(t, 30*time.Second, "attempts to fail while the receiver is down", func() bool {
		return e.count(`SELECT count(DISTINCT delivery_id) FROM webhook_attempts WHERE status_code IS NULL`) >= 100
	})
	restarted := time.Now()
	rcv.Start()
	testenv.Eventually(t, 60*time.Second, "100 events after the restart", func() bool {
		d, _, _ := rcv.seen()
		return d >= 100
	})
	drained := time.Since(restarted)
	time.Sleep(2 * time.Second) // anything extra would arrive now
	distinct, total, bad := rcv.seen()
	t.Logf("acceptance: receiver down while 100 tasks finished; after restart: %d distinct event ids, %d deliveries (%d duplicates), %d bad signatures, all in %s",
		distinct, total, total-distinct, bad, drained.Round(time.Millisecond))
	if distinct != 100 || bad != 0 {
		t.Fatalf("distinct %d (want 100), bad signatures %d (want 0)", distinct, bad)
	}
	rcv.mu.Lock()
	for id, task := range rcv.tasks {
		if !submitted[task] {
			t.Errorf("event %s is about %s, not one of the submitted tasks", id, task)
		}
	}
	body, sig, secret := rcv.lastBody, rcv.lastSig, rcv.secret
	rcv.mu.Unlock()

	// The deliveries API shows the failed attempts (no status code) and the final 2xx.
	ds, err := c.Deliveries(ctx, hook.ID)
	if err != nil || len(ds) == 0 {
		t.Fatalf("deliveries: %v %v", ds, err)
	}
	d := ds[0]
	last := d.Attempts[len(d.Attempts)-1]
	if d.State != "delivered" || len(d.Attempts) < 2 || d.Attempts[0].StatusCode != 0 || d.Attempts[0].Error == "" || last.StatusCode != 204 {
		t.Fatalf("delivery %+v", d)
	}
	// Redeliver sends the same event id again.
	if _, err := c.Redeliver(ctx, hook.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the redelivery", func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.ids[d.EventID] >= 2
	})
	if got, _, _ := rcv.seen(); got != 100 {
		t.Fatalf("a redelivery made a new event id: %d distinct", got)
	}

	// The README's shell snippet verifies a real delivery too.
	verifyWithShellSnippet(t, secret, sig, body)
}

// verifyWithShellSnippet runs the openssl snippet from the README's Integrating section on a
// delivery.
func verifyWithShellSnippet(t *testing.T, secret, sig string, body []byte) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Log("openssl is not installed; the shell snippet was not run")
		return
	}
	snippet := readmeBlock(t, "(?s)<!-- verify-signature-sh -->\\s*```sh\\n(.*?)```",
		"shell verification snippet (marked <!-- verify-signature-sh -->)")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "body.json"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(sig string) string {
		cmd := exec.Command("bash", "-c", snippet)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SECRET="+secret, "SIG="+sig)
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	if out := run(sig); out != "valid" {
		t.Fatalf("the README's shell snippet says %q for a real delivery", out)
	}
	if out := run(strings.Replace(sig, "v1=", "v1=00", 1)); out == "valid" {
		t.Fatal("the README's shell snippet accepts a forged signature")
	}
}

// A receiver on a host the config does not allow is refused at subscription time, with the
// reason; so is a notify_url at submit, and no task is created for it.
func TestWebhookDisallowedHostIsRefusedAtSubscriptionTime(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, map[string]string{"TASKCENTER_TYPES_BENCH_NOOP_DISABLED": "false"}, "api")
	for _, url := range []string{"http://10.1.2.3/hook", "http://169.254.169.254/latest/meta-data/", "http://hooks.example.com/x", "http://127.0.0.1:9/x"} {
		res := p.do("POST", "/api/v1/webhooks", aliceToken, map[string]any{"url": url})
		if res.status != http.StatusUnprocessableEntity || !strings.Contains(string(res.body), `"code":"webhook_url_not_allowed"`) {
			t.Errorf("%s: %d %s", url, res.status, res.body)
		}
	}
	res := p.do("POST", "/api/v1/tasks", aliceToken, map[string]any{"type": "bench:noop", "notify_url": "http://10.1.2.3/hook"})
	if res.status != http.StatusUnprocessableEntity {
		t.Fatalf("notify_url to a private host: %d %s", res.status, res.body)
	}
	if n := e.count(`SELECT count(*) FROM tasks`); n != 0 {
		t.Fatalf("%d tasks created for a refused notify_url", n)
	}
}

// notify_url: the task's own subscription is told of its ending, signed with the secret the
// submit returned.
func TestNotifyURLIsToldWhenTheTaskEnds(t *testing.T) {
	t.Parallel()
	e := webhookEnv(t)
	p := e.start("all")
	rcv := newHookReceiver(t)
	res := p.do("POST", "/api/v1/tasks", aliceToken, map[string]any{"type": "bench:noop", "notify_url": rcv.url()})
	if res.status == http.StatusUnprocessableEntity && strings.Contains(string(res.body), "webhooks.allowed_hosts") {
		t.Skip("the server does not read webhooks.allowed_hosts yet")
	}
	var sub client.Submitted
	res.json(t, &sub)
	if res.status != http.StatusAccepted || sub.Webhook == nil || sub.Webhook.Secret == "" {
		t.Fatalf("submit: %d %s", res.status, res.body)
	}
	rcv.mu.Lock()
	rcv.secret = sub.Webhook.Secret
	rcv.mu.Unlock()
	testenv.Eventually(t, 30*time.Second, "the ending to be delivered", func() bool {
		d, _, _ := rcv.seen()
		return d == 1
	})
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var ev client.WebhookEvent
	if err := json.Unmarshal(rcv.lastBody, &ev); err != nil || ev.Type != "task.succeeded" || ev.Task.ID != sub.Task.ID || rcv.bad != 0 {
		t.Fatalf("event %+v (%v), bad %d", ev, err, rcv.bad)
	}
}

// A receiver that is down, then slow (answering after the sender's timeout, then just slowly),
// then killed mid-answer, then back, while tasks run through two dispatchers (two worker
// processes): every task's events arrive in the order they happened. The first arrival of
// each event has the task's next sequence (1, 2, 3: none missing, none early); a repeat (at
// least once: the answer was lost) only ever repeats the latest one, never an older one; so a
// receiver that keeps the latest status ends with the task's final one.
func TestWebhooksArriveInOrderPerTaskThroughOutagesAndSlowness(t *testing.T) {
	t.Parallel()
	e := webhookEnv(t)
	e.vars["TASKCENTER_WEBHOOKS_TIMEOUT"] = "2s"
	p := e.start("all")
	e.start("worker")
	rcv := newHookReceiver(t)
	p.subscribe(rcv, "task.submitted", "task.started", "task.succeeded")
	c, err := client.New(p.base, aliceToken, client.WithHTTPClient(p.client))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var tasks []string
	submit := func(n int) []string {
		t.Helper()
		var batch []string
		for range n {
			sub, err := c.Submit(ctx, "bench:noop", map[string]any{"note": fmt.Sprint(len(tasks))}, client.SubmitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, sub.Task.ID)
			batch = append(batch, sub.Task.ID)
		}
		return batch
	}
	// failedTasks counts the tasks of batch with a delivery attempt that got no answer.
	failedTasks := func(batch []string) int {
		return e.count(`SELECT count(DISTINCT d.task_no) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
			WHERE a.status_code IS NULL AND d.task_no IN (?)`, bun.In(batch))
	}

	// Down: five tasks run, and their first deliveries fail.
	rcv.Stop()
	first := submit(5)
	testenv.Eventually(t, 60*time.Second, "the first tasks' deliveries to fail while the receiver is down", func() bool {
		return failedTasks(first) == len(first)
	})
	// Slow past the timeout: it takes events in but answers too late, so each is sent again.
	rcv.setDelay(3 * time.Second)
	rcv.Start()
	submit(5)
	testenv.Eventually(t, 60*time.Second, "attempts to time out on the slow receiver", func() bool {
		return e.count(`SELECT count(*) FROM webhook_attempts WHERE error LIKE 'no answer within%'`) >= 3
	})
	// Slow within the timeout: deliveries go through, several tasks' at a time.
	rcv.setDelay(200 * time.Millisecond)
	testenv.Eventually(t, 60*time.Second, "deliveries to the slow receiver", func() bool {
		return e.count(`SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'`) >= 10
	})
	// Killed with answers in flight; five more tasks run while it is down.
	rcv.Stop()
	last := submit(5)
	testenv.Eventually(t, 60*time.Second, "the last tasks' deliveries to fail while the receiver is down", func() bool {
		return failedTasks(last) == len(last)
	})
	// Back, and quick.
	rcv.setDelay(0)
	rcv.Start()
	testenv.Eventually(t, 60*time.Second, "the 15 tasks to end", func() bool {
		return e.count(`SELECT count(*) FROM tasks WHERE type = 'bench:noop' AND status = 'SUCCESS'`) == len(tasks)
	})
	testenv.Eventually(t, 120*time.Second, "every delivery to be delivered", func() bool {
		return e.count(`SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'`) == 3*len(tasks)
	})

	// The outbox: each task's events, in the order they happened.
	var outbox []struct {
		ID     int64  `bun:"id"`
		TaskNo string `bun:"task_no"`
	}
	if err := e.db().NewRaw(`SELECT id, task_no FROM task_events ORDER BY id`).Scan(ctx, &outbox); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, ev := range outbox {
		want[ev.TaskNo] = append(want[ev.TaskNo], fmt.Sprintf("evt_%d", ev.ID))
	}
	attempts := map[string]int{}
	var rows []struct {
		EventID  int64 `bun:"event_id"`
		Attempts int   `bun:"attempts"`
	}
	if err := e.db().NewRaw(`SELECT event_id, attempts FROM webhook_deliveries`).Scan(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		attempts[fmt.Sprintf("evt_%d", r.EventID)] = r.Attempts
	}

	rcv.mu.Lock()
	arrivals, bad := slices.Clone(rcv.arrivals), rcv.bad
	rcv.mu.Unlock()
	if bad != 0 {
		t.Errorf("%d deliveries with a bad signature", bad)
	}
	type seen struct {
		firsts []string // event ids in the order they first arrived
		seq    int64    // the latest sequence arrived
		status string   // the status a receiver keeping the latest one shows
	}
	byTask := map[string]*seen{}
	arrived := map[string]int{}
	repeats := 0
	for _, ev := range arrivals {
		s := byTask[ev.Task.ID]
		if s == nil {
			s = &seen{}
			byTask[ev.Task.ID] = s
		}
		arrived[ev.ID]++
		switch {
		case arrived[ev.ID] == 1 && ev.Sequence == s.seq+1:
			s.firsts = append(s.firsts, ev.ID)
		case arrived[ev.ID] == 1:
			t.Errorf("task %s: %s (%s, sequence %d) arrived first after sequence %d", ev.Task.ID, ev.ID, ev.Type, ev.Sequence, s.seq)
		case ev.Sequence == s.seq:
			repeats++
		default:
			t.Errorf("task %s: %s (%s, sequence %d) arrived again after sequence %d", ev.Task.ID, ev.ID, ev.Type, ev.Sequence, s.seq)
		}
		s.seq = max(s.seq, ev.Sequence)
		s.status = string(ev.Status)
		if arrived[ev.ID] > attempts[ev.ID] {
			t.Errorf("%s arrived %d times in %d attempts", ev.ID, arrived[ev.ID], attempts[ev.ID])
		}
	}
	for _, task := range tasks {
		s := byTask[task]
		if s == nil {
			t.Errorf("task %s: nothing arrived", task)
			continue
		}
		if !slices.Equal(s.firsts, want[task]) || len(want[task]) != 3 {
			t.Errorf("task %s: events arrived first as %v; the outbox has %v", task, s.firsts, want[task])
		}
		if s.status != "SUCCESS" {
			t.Errorf("task %s: a receiver keeping the latest status shows %s", task, s.status)
		}
	}
	if len(arrived) != 3*len(tasks) || len(byTask) != len(tasks) {
		t.Errorf("%d distinct events of %d tasks arrived; want %d of %d", len(arrived), len(byTask), 3*len(tasks), len(tasks))
	}
	t.Logf("%d tasks, %d events: %d deliveries arrived in order per task, %d of them repeats of an unanswered one",
		len(tasks), len(arrived), len(arrivals), repeats)
}
