package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/httpapi/automation"
	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/webhook"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

func withWebhooks(allowed ...string) func(*Deps) {
	return func(d *Deps) {
		p, err := webhook.NewPolicy(allowed)
		if err != nil {
			panic(err)
		}
		d.Webhooks = p
	}
}

func decodeAs[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

func TestWebhookSubscriptionLifecycle(t *testing.T) {
	t.Parallel()
	e := newAPI(t, withWebhooks("127.0.0.1"))

	res := e.call("POST", "/api/v1/webhooks", aliceToken, strings.NewReader(`{"url":"http://127.0.0.1:9/hook"}`))
	if res.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", res.Code, res.Body)
	}
	created := decodeAs[automation.WebhookView](t, res.Body.Bytes())
	if !strings.HasPrefix(created.Secret, "whsec_") || len(created.Events) != 5 || created.Owner != "alice" {
		t.Fatalf("created %+v", created)
	}
	// The secret is shown once: never in a read.
	res = e.call("GET", "/api/v1/webhooks/"+created.ID, aliceToken, nil)
	if res.Code != http.StatusOK || strings.Contains(res.Body.String(), created.Secret) {
		t.Fatalf("get: %d %s", res.Code, res.Body)
	}
	res = e.call("GET", "/api/v1/webhooks", aliceToken, nil)
	if list := decodeAs[struct{ Items []automation.WebhookView }](t, res.Body.Bytes()); len(list.Items) != 1 || list.Items[0].Secret != "" {
		t.Fatalf("list: %s", res.Body)
	}
	// Another user neither sees nor deletes it; an admin does both.
	if res := e.call("GET", "/api/v1/webhooks/"+created.ID, bobToken, nil); res.Code != http.StatusNotFound || !strings.Contains(res.Body.String(), "webhook_not_found") {
		t.Fatalf("bob reads alice's webhook: %d %s", res.Code, res.Body)
	}
	if res := e.call("DELETE", "/api/v1/webhooks/"+created.ID, bobToken, nil); res.Code != http.StatusNotFound {
		t.Fatalf("bob deletes alice's webhook: %d", res.Code)
	}
	if res := e.call("GET", "/api/v1/webhooks?owner=alice", adminToken, nil); !strings.Contains(res.Body.String(), created.ID) {
		t.Fatalf("admin list: %s", res.Body)
	}
	// An admin may subscribe for another user; a user may not.
	if res := e.call("POST", "/api/v1/webhooks", bobToken, strings.NewReader(`{"url":"http://127.0.0.1:9/h","owner":"alice"}`)); res.Code != http.StatusForbidden {
		t.Fatalf("bob subscribes for alice: %d", res.Code)
	}
	if res := e.call("POST", "/api/v1/webhooks", adminToken, strings.NewReader(`{"url":"http://127.0.0.1:9/h","owner":"bob","events":["task.started","task.failed"],"secret":"my-own-secret-0123"}`)); res.Code != http.StatusCreated ||
		decodeAs[automation.WebhookView](t, res.Body.Bytes()).Secret != "my-own-secret-0123" {
		t.Fatalf("admin subscribes for bob: %d %s", res.Code, res.Body)
	}
	if res := e.call("DELETE", "/api/v1/webhooks/"+created.ID, adminToken, nil); res.Code != http.StatusNoContent {
		t.Fatalf("admin deletes: %d %s", res.Code, res.Body)
	}
}

// A receiver on a host the config does not allow is refused when subscribing, with the
// reason in words, and so is a loopback or private address not listed by address.
func TestWebhookURLsAreCheckedAtSubscriptionTime(t *testing.T) {
	t.Parallel()
	e := newAPI(t, withWebhooks("127.0.0.1"))
	for _, tc := range []struct{ body, code, says string }{
		{`{"url":"http://10.0.0.5/hook"}`, "webhook_url_not_allowed", "not in webhooks.allowed_hosts"},
		{`{"url":"http://169.254.169.254/latest/meta-data"}`, "webhook_url_not_allowed", "not in webhooks.allowed_hosts"},
		{`{"url":"http://127.0.0.2/hook"}`, "webhook_url_not_allowed", "not in webhooks.allowed_hosts"},
		{`{"url":"gopher://127.0.0.1/"}`, "webhook_url_not_allowed", "http"},
		{`{"url":""}`, "webhook_url_not_allowed", "required"},
		{`{"url":"http://127.0.0.1/h","events":["task.exploded"]}`, "bad_events", "task.exploded"},
		{`{"url":"http://127.0.0.1/h","secret":"short"}`, "bad_secret", "at least 16"},
	} {
		res := e.call("POST", "/api/v1/webhooks", aliceToken, strings.NewReader(tc.body))
		if res.Code != http.StatusUnprocessableEntity || !strings.Contains(res.Body.String(), `"code":"`+tc.code+`"`) || !strings.Contains(res.Body.String(), tc.says) {
			t.Errorf("%s: %d %s", tc.body, res.Code, res.Body)
		}
	}
	// A name entry never opens loopback: localhost is refused for what it resolves to.
	byName := newAPI(t, withWebhooks("localhost"))
	if res := byName.call("POST", "/api/v1/webhooks", aliceToken, strings.NewReader(`{"url":"http://localhost:8080/hook"}`)); res.Code != http.StatusUnprocessableEntity ||
		!strings.Contains(res.Body.String(), "loopback") {
		t.Fatalf("localhost by name: %d %s", res.Code, res.Body)
	}
	// With the default config nothing is allowed.
	def := newAPI(t)
	if res := def.call("POST", "/api/v1/webhooks", aliceToken, strings.NewReader(`{"url":"http://127.0.0.1/h"}`)); res.Code != http.StatusUnprocessableEntity {
		t.Fatalf("default config: %d %s", res.Code, res.Body)
	}
}

// notify_url at submit binds a subscription to the task (secret in the answer, once); a
// refused URL leaves no task behind.
func TestNotifyURLAtSubmit(t *testing.T) {
	t.Parallel()
	e := newAPI(t, withWebhooks("127.0.0.1"))
	res := e.call("POST", "/api/v1/exports", aliceToken, strings.NewReader(`{"type":"customers","notify_url":"http://127.0.0.1:9/done"}`), "Idempotency-Key", "k1")
	if res.Code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", res.Code, res.Body)
	}
	sv := decodeAs[SubmitView](t, res.Body.Bytes())
	if sv.Webhook == nil || sv.Webhook.Secret == "" || sv.Webhook.TaskID != sv.Task.ID || sv.Webhook.URL != "http://127.0.0.1:9/done" {
		t.Fatalf("webhook in the answer: %+v", sv.Webhook)
	}
	// The replay returns the task and its subscription, without the secret.
	res = e.call("POST", "/api/v1/exports", aliceToken, strings.NewReader(`{"type":"customers","notify_url":"http://127.0.0.1:9/done"}`), "Idempotency-Key", "k1")
	replay := decodeAs[SubmitView](t, res.Body.Bytes())
	if res.Code != http.StatusOK || replay.Webhook == nil || replay.Webhook.ID != sv.Webhook.ID || replay.Webhook.Secret != "" {
		t.Fatalf("replay: %d %s", res.Code, res.Body)
	}
	res = e.call("GET", "/api/v1/webhooks/"+sv.Webhook.ID+"/deliveries", aliceToken, nil)
	if res.Code != http.StatusOK {
		t.Fatalf("deliveries: %d %s", res.Code, res.Body)
	}
	// Generic submit takes it too; a refused URL creates nothing.
	res = e.call("POST", "/api/v1/tasks", aliceToken, strings.NewReader(`{"type":"bench:noop","notify_url":"http://192.168.1.1/x"}`))
	if res.Code != http.StatusUnprocessableEntity || !strings.Contains(res.Body.String(), "notify_url") {
		t.Fatalf("refused notify_url: %d %s", res.Code, res.Body)
	}
	tasks, _, err := e.st.List(context.Background(), store.ListFilter{Limit: 10}, store.Scope{Owner: "alice"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks after a refused notify_url: %d %v", len(tasks), err)
	}
	res = e.call("POST", "/api/v1/tasks", aliceToken, strings.NewReader(`{"type":"bench:noop","notify_url":"http://127.0.0.1:9/x","notify_secret":"a-secret-of-my-own"}`))
	if sv := decodeAs[SubmitView](t, res.Body.Bytes()); res.Code != http.StatusAccepted || sv.Webhook == nil || sv.Webhook.Secret != "a-secret-of-my-own" {
		t.Fatalf("generic submit: %d %s", res.Code, res.Body)
	}
}

func TestDeliveriesAndRedeliver(t *testing.T) {
	t.Parallel()
	e := newAPI(t, withWebhooks("127.0.0.1"))
	ctx := context.Background()
	res := e.call("POST", "/api/v1/webhooks", aliceToken, strings.NewReader(`{"url":"http://127.0.0.1:9/hook","events":["task.submitted"]}`))
	hook := decodeAs[automation.WebhookView](t, res.Body.Bytes())
	if res := e.call("POST", "/api/v1/tasks", aliceToken, strings.NewReader(`{"type":"bench:noop"}`)); res.Code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", res.Code, res.Body)
	}
	if _, d, err := e.st.FanOut(ctx, 10, webhook.BuildPayload); err != nil || d != 1 {
		t.Fatalf("fan out: %d %v", d, err)
	}
	out, err := e.st.ClaimDeliveries(ctx, 10, 4, 60e9)
	if err != nil || len(out) != 1 {
		t.Fatalf("claim: %v %v", out, err)
	}
	if _, _, err := e.st.RecordAttempt(ctx, &out[0].Delivery, webhooks.AttemptResult{StatusCode: 503, Latency: 42e6, Error: "HTTP 503"}); err != nil {
		t.Fatal(err)
	}
	res = e.call("GET", "/api/v1/webhooks/"+hook.ID+"/deliveries", aliceToken, nil)
	list := decodeAs[struct{ Items []automation.DeliveryView }](t, res.Body.Bytes())
	if len(list.Items) != 1 {
		t.Fatalf("deliveries: %s", res.Body)
	}
	d := list.Items[0]
	if d.State != webhooks.DeliveryDead || d.Event != "task.submitted" || !strings.HasPrefix(d.EventID, "evt_") || len(d.Attempts) != 1 ||
		d.Attempts[0].StatusCode != 503 || d.Attempts[0].LatencyMS != 42 || d.Attempts[0].Error != "HTTP 503" {
		t.Fatalf("delivery view: %+v", d)
	}
	if res := e.call("POST", "/api/v1/webhooks/"+hook.ID+"/deliveries/"+d.ID+"/redeliver", bobToken, nil); res.Code != http.StatusNotFound {
		t.Fatalf("bob redelivers: %d", res.Code)
	}
	res = e.call("POST", "/api/v1/webhooks/"+hook.ID+"/deliveries/"+d.ID+"/redeliver", aliceToken, nil)
	if res.Code != http.StatusAccepted || decodeAs[automation.DeliveryView](t, res.Body.Bytes()).State != webhooks.DeliveryPending {
		t.Fatalf("redeliver: %d %s", res.Code, res.Body)
	}
	if res := e.call("POST", "/api/v1/webhooks/"+hook.ID+"/deliveries/dlv_nope/redeliver", aliceToken, nil); res.Code != http.StatusNotFound ||
		!strings.Contains(res.Body.String(), "delivery_not_found") {
		t.Fatalf("unknown delivery: %d %s", res.Code, res.Body)
	}
}

// A task and the subscription it was submitted with commit together: when the subscription
// cannot be written, the submit fails whole and leaves nothing behind — no task row, no
// event, no audit row of a submit, no subscription, no job in Redis — on every submit route
// (the import's stored upload included), whether its insert runs alone or grouped with
// concurrent submits (jobs.Creator, as in production). A client that retries without an
// Idempotency-Key must not end with two running tasks.
func TestASubmitWhoseSubscriptionFailsCreatesNothing(t *testing.T) {
	t.Parallel()
	const hook = "http://127.0.0.1:9/done"
	submits := []struct {
		name string
		send func(e *apiEnv, notify bool) *httptest.ResponseRecorder
	}{
		{"export", func(e *apiEnv, notify bool) *httptest.ResponseRecorder {
			body := map[string]any{"type": "customers"}
			if notify {
				body["notify_url"] = hook
			}
			return e.callJSON("POST", "/api/v1/exports", aliceToken, body)
		}},
		{"any type", func(e *apiEnv, notify bool) *httptest.ResponseRecorder {
			body := map[string]any{"type": "bench:noop"}
			if notify {
				body["notify_url"] = hook
			}
			return e.callJSON("POST", "/api/v1/tasks", aliceToken, body)
		}},
		{"import", func(e *apiEnv, notify bool) *httptest.ResponseRecorder {
			fields := map[string]string{}
			if notify {
				fields["notify_url"] = hook
			}
			body, ct := multipartBody(e.t, "c.csv", []byte("code,name,phone\nC1,A,13800000001\n"), fields)
			return e.call("POST", "/api/v1/imports", aliceToken, body, "Content-Type", ct)
		}},
	}
	for _, grouped := range []bool{false, true} {
		for _, sub := range submits {
			name := sub.name
			if grouped {
				name += ", grouped with concurrent submits"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var change []func(*Deps)
				if grouped {
					change = append(change, func(d *Deps) {
						c := jobs.NewCreator(d.Store, batch.Config{MaxBatch: 16}, d.Logger)
						t.Cleanup(c.Close)
						d.Submitter.WithCreator(c)
					})
				}
				e := newAPI(t, append(change, withWebhooks("127.0.0.1"))...)
				ctx := context.Background()
				// Make every subscription insert fail, as a constraint or a lost connection would.
				for _, q := range []string{
					`CREATE FUNCTION refuse_subscription() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no subscriptions today'; END $$`,
					`CREATE TRIGGER refuse_subscription BEFORE INSERT ON webhook_subscriptions FOR EACH ROW EXECUTE FUNCTION refuse_subscription()`,
				} {
					if _, err := e.pg.DB.ExecContext(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
				res := sub.send(e, true)
				if res.Code < 500 {
					t.Fatalf("submit whose subscription failed: %d %s, want a server error", res.Code, res.Body)
				}
				if pr := problemOf(t, res); strings.Contains(pr.Detail, "no subscriptions today") {
					t.Fatalf("the database's error leaked: %+v", pr)
				}
				for table, q := range map[string]string{
					"tasks":                 `SELECT count(*) FROM tasks`,
					"task_events":           `SELECT count(*) FROM task_events`,
					"webhook_subscriptions": `SELECT count(*) FROM webhook_subscriptions`,
					"submit audit rows":     `SELECT count(*) FROM audit_events WHERE action = 'task.submit' AND outcome = 'success'`,
				} {
					var n int
					if err := e.pg.DB.NewRaw(q).Scan(ctx, &n); err != nil || n != 0 {
						t.Fatalf("%d %s after the failed submit (err %v), want none", n, table, err)
					}
				}
				if n := e.queuedJobs(); n != 0 {
					t.Fatalf("%d jobs in Redis after the failed submit, want none", n)
				}
				// Without a notify_url the same submit goes through, and is enqueued.
				if res := sub.send(e, false); res.Code != http.StatusAccepted {
					t.Fatalf("plain submit: %d %s", res.Code, res.Body)
				}
				if n := e.queuedJobs(); n != 1 {
					t.Fatalf("%d jobs in Redis after the plain submit, want 1", n)
				}
			})
		}
	}
}

// queuedJobs counts the jobs waiting in every asynq queue of the test's Redis.
func (e *apiEnv) queuedJobs() int {
	e.t.Helper()
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	queues, err := insp.Queues()
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, q := range queues {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			e.t.Fatal(err)
		}
		n += info.Size
	}
	return n
}
