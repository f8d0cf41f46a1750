package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
	"github.com/taskcenter/taskcenter/store/storetest"
)

const consoleAdmin = "admin-token-0123456789"

// consoleEnv is a console over a test's own Redis database (and Postgres, when it acts on
// tasks).
type consoleEnv struct {
	t    *testing.T
	rd   *testenv.Redis
	conn asynq.RedisClientOpt
}

func newConsoleEnv(t *testing.T) *consoleEnv {
	t.Helper()
	rd := testenv.NewRedis(t)
	return &consoleEnv{t: t, rd: rd, conn: asynq.RedisClientOpt{Addr: rd.Addr, DB: rd.DB}}
}

// console builds a console (one "replica") with cfg, defaulting the admin token and TTL.
func (e *consoleEnv) console(cfg ConsoleConfig) *Console {
	e.t.Helper()
	if cfg.AdminTokens == nil {
		cfg.AdminTokens = []string{consoleAdmin}
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger, _ = quietLogger()
	}
	c := NewConsole(e.conn, cfg)
	e.t.Cleanup(func() { c.Close() })
	return c
}

// send serves one request in-process from addr.
func send(c *Console, method, path, addr string, set func(*http.Request), body io.Reader) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, body)
	req.RemoteAddr = addr
	if set != nil {
		set(req)
	}
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, req)
	return rec
}

// readQueues reads the queue list from addr, as every console page does once signed in.
func readQueues(c *Console, addr string, set func(*http.Request)) *httptest.ResponseRecorder {
	return send(c, "GET", ConsolePath+"/api/queues", addr, set, nil)
}

func login(c *Console, token, addr string) *httptest.ResponseRecorder {
	return send(c, "POST", ConsolePath+"/login", addr, func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}, strings.NewReader(url.Values{"token": {token}}.Encode()))
}

func sessionOf(t *testing.T, rec *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	res := rec.Result()
	if rec.Code != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("login: %d %v", rec.Code, res.Cookies())
	}
	return res.Cookies()[0]
}

func withCookie(ck *http.Cookie) func(*http.Request) {
	return func(r *http.Request) { r.AddCookie(ck) }
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

const here = "192.0.2.10:4000"

func TestConsoleSessionsAreServerSideAndRevocable(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	a := e.console(ConsoleConfig{})
	b := e.console(ConsoleConfig{}) // another API replica with the same config

	ck := sessionOf(t, login(a, consoleAdmin, here))
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != ConsolePath || ck.MaxAge != 3600 {
		t.Fatalf("cookie attributes: %+v", ck)
	}
	if strings.Contains(ck.Value, consoleAdmin) || len(ck.Value) != 43 {
		t.Fatalf("the cookie is not an opaque session id: %q", ck.Value)
	}
	for name, c := range map[string]*Console{"the replica that logged in": a, "another replica": b} {
		if rec := readQueues(c, here, withCookie(ck)); rec.Code != http.StatusOK {
			t.Fatalf("session on %s: %d %s", name, rec.Code, rec.Body)
		}
	}
	// Logging out on one replica ends the session everywhere, though the browser (or a
	// thief) keeps the cookie.
	if rec := send(b, "POST", ConsolePath+"/logout", here, withCookie(ck), nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("logout: %d", rec.Code)
	}
	for name, c := range map[string]*Console{"the replica that logged in": a, "the replica that logged out": b} {
		if rec := readQueues(c, here, withCookie(ck)); rec.Code != http.StatusUnauthorized {
			t.Fatalf("a logged-out cookie on %s: %d", name, rec.Code)
		}
	}
	if keys, _ := e.rd.Client.Keys(context.Background(), sessionPrefix+"*").Result(); len(keys) != 0 {
		t.Fatalf("sessions left in Redis after logout: %v", keys)
	}

	// A session dies with its admin token: a replica whose config no longer has the token
	// refuses sessions opened with it.
	ck = sessionOf(t, login(a, consoleAdmin, here))
	rotated := e.console(ConsoleConfig{AdminTokens: []string{"a-new-admin-token-000"}})
	if rec := readQueues(rotated, here, withCookie(ck)); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a session of a removed token: %d", rec.Code)
	}
	forged := &http.Cookie{Name: sessionCookie, Value: strings.Repeat("A", 43)}
	if rec := readQueues(a, here, withCookie(forged)); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a made-up session id: %d", rec.Code)
	}
}

func TestConsoleSessionNeverOutlivesSessionTTL(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	long := e.console(ConsoleConfig{SessionTTL: 24 * time.Hour})
	short := e.console(ConsoleConfig{SessionTTL: time.Hour}) // the config was shortened since
	ck := sessionOf(t, login(long, consoleAdmin, here))
	ctx := context.Background()
	key := sessionKey(ck.Value)
	raw, err := e.rd.Client.Get(ctx, key).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if ttl := e.rd.Client.TTL(ctx, key).Val(); ttl <= 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("session TTL in Redis %s, want 24h", ttl)
	}
	var s sessionData
	json.Unmarshal(raw, &s) //nolint:errcheck
	if s.User != "admin" || s.Token == "" || strings.Contains(string(raw), consoleAdmin) {
		t.Fatalf("session record %s", raw)
	}
	// Two hours in: fine for 24 h, over the shortened TTL.
	s.Issued -= 2 * 3600
	raw, _ = json.Marshal(s)
	e.rd.Client.Set(ctx, key, raw, redis.KeepTTL) //nolint:errcheck
	if rec := readQueues(long, here, withCookie(ck)); rec.Code != http.StatusOK {
		t.Fatalf("within its TTL: %d", rec.Code)
	}
	if rec := readQueues(short, here, withCookie(ck)); rec.Code != http.StatusUnauthorized {
		t.Fatalf("past session_ttl: %d", rec.Code)
	}
	// Even if the Redis key were kept forever, the login time caps the session.
	s.Issued -= 24 * 3600
	raw, _ = json.Marshal(s)
	e.rd.Client.Set(ctx, key, raw, 0) //nolint:errcheck
	if rec := readQueues(long, here, withCookie(ck)); rec.Code != http.StatusUnauthorized {
		t.Fatalf("26 hours after login: %d", rec.Code)
	}
}

func TestConsoleLoginsAreThrottledPerAddress(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c := e.console(ConsoleConfig{LoginFailures: 3, LoginWindow: 2 * time.Second, Username: "ops", Password: "correct horse battery"})
	const attacker, colleague = "198.51.100.7:5555", "203.0.113.9:6666"
	if rec := login(c, "guess-1", attacker); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", rec.Code)
	}
	if rec := readQueues(c, attacker, bearer("guess-2")); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong bearer token: %d", rec.Code)
	}
	if rec := readQueues(c, attacker, func(r *http.Request) { r.SetBasicAuth("ops", "guess-3") }); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", rec.Code)
	}
	// Three failures in the window: every further wrong credential from that address waits.
	for name, try := range map[string]func() *httptest.ResponseRecorder{
		"login": func() *httptest.ResponseRecorder { return login(c, "guess-4", attacker) },
		"bearer": func() *httptest.ResponseRecorder {
			return readQueues(c, attacker, bearer("guess-5"))
		},
	} {
		rec := try()
		retry, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
		if rec.Code != http.StatusTooManyRequests || retry < 1 || retry > 2 {
			t.Fatalf("%s after 3 failures: %d Retry-After %q", name, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	// A valid admin credential always passes, however much junk its address sent (behind a
	// proxy every client shares one address): 50 more junk tokens, then the admin's.
	for i := range 50 {
		readQueues(c, attacker, bearer(fmt.Sprintf("junk-%d", i)))
	}
	if rec := readQueues(c, attacker, bearer(consoleAdmin)); rec.Code != http.StatusOK {
		t.Fatalf("the admin's token after 50 junk tokens: %d", rec.Code)
	}
	sessionOf(t, login(c, consoleAdmin, attacker))
	// Other addresses are not affected.
	sessionOf(t, login(c, consoleAdmin, colleague))
	// The window passes.
	testenv.Eventually(t, 5*time.Second, "the throttle window to pass", func() bool {
		return login(c, "guess-6", attacker).Code == http.StatusUnauthorized
	})
}

func TestReadOnlyConsoleRefusesEveryChange(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	client := asynq.NewClientFromRedisClient(e.rd.Client)
	if _, err := client.Enqueue(asynq.NewTask("export:customers", nil), asynq.Queue("exports"), asynq.TaskID("tsk_RO-a0")); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]ConsoleConfig{
		"read_only":            {ReadOnly: true},
		"without a task store": {ReadOnly: false},
	} {
		c := e.console(cfg)
		for _, r := range []struct{ method, path string }{
			{"DELETE", "/api/queues/exports/pending_tasks/tsk_RO-a0"},
			{"POST", "/api/queues/exports/pending_tasks/tsk_RO-a0:archive"},
			{"POST", "/api/queues/exports/scheduled_tasks/tsk_RO-a0:run"},
			{"POST", "/api/queues/exports/active_tasks/tsk_RO-a0:cancel"},
			{"POST", "/api/queues/exports:pause"},
			{"DELETE", "/api/queues/exports"},
			{"DELETE", "/api/queues/exports/pending_tasks:delete_all"},
			{"PUT", "/api/queues/exports/anything"},
		} {
			rec := send(c, r.method, ConsolePath+r.path, here, bearer(consoleAdmin), nil)
			if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "/api/v1/tasks/{id}/cancel") {
				t.Errorf("%s: %s %s: %d %s", name, r.method, r.path, rec.Code, rec.Body)
			}
		}
		if rec := send(c, "GET", ConsolePath+"/api/queues/exports/pending_tasks", here, bearer(consoleAdmin), nil); rec.Code != http.StatusOK ||
			!strings.Contains(rec.Body.String(), "tsk_RO-a0") {
			t.Errorf("%s: reading: %d %s", name, rec.Code, rec.Body)
		}
	}
	info, err := asynq.NewInspectorFromRedisClient(e.rd.Client).GetTaskInfo("exports", "tsk_RO-a0")
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("the job after refused actions: %v %v", info, err)
	}
}

// What each console action does to the task row, when an operator turns read_only off.
func TestConsoleActionsAreTaskTransitions(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	pg := storetest.NewPostgres(t)
	st := store.New(pg.DB)
	inspector := asynq.NewInspectorFromRedisClient(e.rd.Client)
	enq := jobs.NewEnqueuer(asynq.NewClientFromRedisClient(e.rd.Client), inspector, nil)
	logger, logs := quietLogger()
	c := e.console(ConsoleConfig{ReadOnly: false, Tasks: st, Logger: logger, AdminUsers: map[string]string{consoleAdmin: "ops"}})
	ctx := context.Background()

	// Builders: a waiting task with its pending job, a task in its retry back-off with a
	// scheduled job, a running task.
	pending := func() *store.Task {
		t.Helper()
		task, _, err := st.Create(ctx, store.NewTask{TaskNo: jobs.NewTaskNo(), Type: "export:customers", Owner: "alice", Queue: "exports", MaxRetry: 3, TimeoutSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		if err := enq.Enqueue(ctx, task); err != nil {
			t.Fatal(err)
		}
		return task
	}
	running := func() (*store.Task, string) {
		t.Helper()
		task := pending()
		job := jobs.JobID(task.TaskNo, task.Attempt)
		if _, err := st.ClaimTask(ctx, task.ID, "w1", time.Minute); err != nil {
			t.Fatal(err)
		}
		return task, job
	}
	retrying := func() *store.Task {
		t.Helper()
		task, job := running()
		inspector.DeleteTask(jobs.Lane(task), job) //nolint:errcheck // the delivered job is done with
		claimed, err := st.GetByID(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		waiting, err := st.EndRetryWait(ctx, store.Lease{TaskID: task.ID, TaskNo: task.TaskNo, Attempt: claimed.Attempt}, "transient", "try later", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := enq.Enqueue(ctx, waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	}
	row := func(task *store.Task) *store.Task {
		t.Helper()
		got, err := st.Get(ctx, task.TaskNo, store.Scope{Admin: true})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	jobState := func(task *store.Task) string {
		info, err := inspector.GetTaskInfo(jobs.Lane(task), jobs.JobID(task.TaskNo, task.Attempt))
		if errors.Is(err, asynq.ErrTaskNotFound) {
			return "gone"
		}
		if err != nil {
			t.Fatal(err)
		}
		return info.State.String()
	}
	taskLog := func(task *store.Task) string {
		entries, _ := st.RecentLogs(ctx, task.ID, 20)
		var b strings.Builder
		for _, l := range entries {
			b.WriteString(l.Message + "\n")
		}
		return b.String()
	}
	// act sends a console action on the lane (asynq queue) task waits in.
	act := func(task *store.Task, method, path string) *httptest.ResponseRecorder {
		return send(c, method, ConsolePath+"/api/queues/"+jobs.Lane(task)+"/"+path, here, bearer(consoleAdmin), nil)
	}

	t.Run("delete of a pending job cancels its task", func(t *testing.T) {
		task := pending()
		rec := act(task, "DELETE", "pending_tasks/"+jobs.JobID(task.TaskNo, task.Attempt))
		got := row(task)
		if rec.Code != http.StatusNoContent || got.Status != store.StatusCancelled || jobState(task) != "gone" ||
			!strings.Contains(taskLog(task), "cancelled by ops from the console") {
			t.Fatalf("%d %s: row %s, job %s, log %q", rec.Code, rec.Body, got.Status, jobState(task), taskLog(task))
		}
	})
	t.Run("archive of a pending job cancels its task", func(t *testing.T) {
		task := pending()
		rec := act(task, "POST", "pending_tasks/"+jobs.JobID(task.TaskNo, task.Attempt)+":archive")
		if got := row(task); rec.Code != http.StatusNoContent || got.Status != store.StatusCancelled || jobState(task) != "archived" {
			t.Fatalf("%d %s: row %s, job %s", rec.Code, rec.Body, got.Status, jobState(task))
		}
	})
	t.Run("delete of a scheduled retry cancels its task", func(t *testing.T) {
		task := retrying()
		if jobState(task) != "scheduled" {
			t.Fatalf("fixture: job %s", jobState(task))
		}
		rec := act(task, "DELETE", "scheduled_tasks/"+jobs.JobID(task.TaskNo, task.Attempt))
		if got := row(task); rec.Code != http.StatusNoContent || got.Status != store.StatusCancelled || jobState(task) != "gone" {
			t.Fatalf("%d %s: row %s, job %s", rec.Code, rec.Body, got.Status, jobState(task))
		}
	})
	t.Run("run now of a scheduled retry brings the task's retry forward", func(t *testing.T) {
		task := retrying()
		before := row(task)
		rec := act(task, "POST", "scheduled_tasks/"+jobs.JobID(task.TaskNo, task.Attempt)+":run")
		got := row(task)
		if rec.Code != http.StatusNoContent || got.Status != store.StatusRetryWait || got.NextRetryAt == nil ||
			!got.NextRetryAt.Before(before.NextRetryAt.Add(-30*time.Minute)) || jobState(task) != "pending" ||
			!strings.Contains(taskLog(task), "retry brought forward by ops from the console") {
			t.Fatalf("%d %s: row %s next %v (was %v), job %s, log %q", rec.Code, rec.Body, got.Status, got.NextRetryAt, before.NextRetryAt, jobState(task), taskLog(task))
		}
	})
	t.Run("cancel of an active job requests the task's cancel", func(t *testing.T) {
		task, job := running()
		rec := act(task, "POST", "active_tasks/"+job+":cancel")
		got := row(task)
		if rec.Code != http.StatusNoContent || got.Status != store.StatusRunning || !got.CancelRequested ||
			!strings.Contains(taskLog(task), "cancel requested by ops from the console") {
			t.Fatalf("%d %s: row %s cancel %v", rec.Code, rec.Body, got.Status, got.CancelRequested)
		}
		// Asked again once the task has ended: nothing to cancel.
		pg.DB.ExecContext(ctx, "UPDATE tasks SET status = 'SUCCESS', finished_at = now() WHERE id = ?", task.ID) //nolint:errcheck
		if rec := act(task, "POST", "active_tasks/"+job+":cancel"); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "SUCCESS") {
			t.Fatalf("cancel of an ended task: %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("delete of a pending takeover job of a running task requests its cancel and keeps the job", func(t *testing.T) {
		task, _ := running()
		now := row(task)
		if err := enq.Enqueue(ctx, now); err != nil { // as the orphan step does for a silent worker
			t.Fatal(err)
		}
		rec := act(now, "DELETE", "pending_tasks/"+jobs.JobID(now.TaskNo, now.Attempt))
		got := row(task)
		if rec.Code != http.StatusAccepted || got.Status != store.StatusRunning || !got.CancelRequested || jobState(now) != "pending" {
			t.Fatalf("%d %s: row %s cancel %v, job %s", rec.Code, rec.Body, got.Status, got.CancelRequested, jobState(now))
		}
	})
	t.Run("run of an archived job is refused", func(t *testing.T) {
		task := pending()
		job := jobs.JobID(task.TaskNo, task.Attempt)
		inspector.ArchiveTask(jobs.Lane(task), job) //nolint:errcheck
		rec := act(task, "POST", "archived_tasks/"+job+":run")
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "/api/v1/tasks/"+task.TaskNo+"/retry") ||
			row(task).Status != store.StatusPending || jobState(task) != "archived" {
			t.Fatalf("%d %s: row %s, job %s", rec.Code, rec.Body, row(task).Status, jobState(task))
		}
	})
	t.Run("bulk actions are refused", func(t *testing.T) {
		task := pending()
		for _, p := range []struct{ method, path string }{
			{"DELETE", "pending_tasks:delete_all"}, {"POST", "pending_tasks:batch_delete"}, {"POST", "pending_tasks:archive_all"},
			{"POST", "scheduled_tasks:run_all"}, {"POST", "active_tasks:cancel_all"}, {"POST", "retry_tasks:batch_run"},
		} {
			if rec := act(task, p.method, p.path); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "task API") {
				t.Errorf("%s %s: %d %s", p.method, p.path, rec.Code, rec.Body)
			}
		}
		if row(task).Status != store.StatusPending || jobState(task) != "pending" {
			t.Fatalf("bulk refusals changed the task: row %s job %s", row(task).Status, jobState(task))
		}
		if rec := send(c, "DELETE", ConsolePath+"/api/queues/exports", here, bearer(consoleAdmin), nil); rec.Code != http.StatusForbidden {
			t.Fatalf("deleting a queue: %d", rec.Code)
		}
	})
	t.Run("pause and resume of a queue go through", func(t *testing.T) {
		if rec := send(c, "POST", ConsolePath+"/api/queues/exports:pause", here, bearer(consoleAdmin), nil); rec.Code != http.StatusNoContent {
			t.Fatalf("pause: %d %s", rec.Code, rec.Body)
		}
		q, err := inspector.GetQueueInfo("exports")
		if err != nil || !q.Paused {
			t.Fatalf("queue after pause: %+v %v", q, err)
		}
		if rec := send(c, "POST", ConsolePath+"/api/queues/exports:resume", here, bearer(consoleAdmin), nil); rec.Code != http.StatusNoContent {
			t.Fatalf("resume: %d", rec.Code)
		}
	})
	t.Run("jobs that are not a task's pass through", func(t *testing.T) {
		client := asynq.NewClientFromRedisClient(e.rd.Client)
		if _, err := client.Enqueue(asynq.NewTask("maintenance:cleanup", nil), asynq.Queue("exports"), asynq.TaskID("cleanup-0001")); err != nil {
			t.Fatal(err)
		}
		if rec := send(c, "DELETE", ConsolePath+"/api/queues/exports/pending_tasks/cleanup-0001", here, bearer(consoleAdmin), nil); rec.Code != http.StatusNoContent {
			t.Fatalf("delete of a cleanup job: %d %s", rec.Code, rec.Body)
		}
	})
	if !strings.Contains(logs.String(), "cancelled from the console by ops") {
		t.Fatalf("no process log line for the console's cancels:\n%s", logs.String())
	}
}

// auditKinds lists the audit rows, oldest first, as "actor action outcome status ×count".
func auditKinds(t *testing.T, st *store.Store) []string {
	t.Helper()
	rows, _, err := st.ListAudit(context.Background(), audit.Filter{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		e := rows[i]
		out = append(out, fmt.Sprintf("%s %s %s %d ×%d", e.Actor, e.Action, e.Outcome, e.Status, e.Count))
	}
	return out
}

// Every console sign-in, sign-out, refused credential and throttled attempt is in the audit
// trail exactly once: sign-ins and sign-outs a row each, refusals of nobody counted on one row
// per address, minute and kind whose count is the attempts.
func TestConsoleSignInsAndOutsAreAudited(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	pg := storetest.NewPostgres(t)
	st := store.New(pg.DB)
	c := e.console(ConsoleConfig{LoginFailures: 3, LoginWindow: time.Minute, Audit: st, Username: "ops", Password: "correct horse battery"})
	const addr = "198.51.100.8:5555"
	testenv.FreshMinute(t, pg.DB)
	ck := sessionOf(t, login(c, consoleAdmin, addr))
	if rec := send(c, "POST", ConsolePath+"/logout", addr, withCookie(ck), nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("logout: %d", rec.Code)
	}
	// Three refused credentials, one of each way in: counted, then throttled.
	login(c, "guess-1", addr)
	readQueues(c, addr, bearer("guess-2"))
	readQueues(c, addr, func(r *http.Request) { r.SetBasicAuth("ops", "guess-3") })
	for i := range 7 {
		if rec := readQueues(c, addr, bearer(fmt.Sprint("junk-", i))); rec.Code != http.StatusTooManyRequests {
			t.Fatalf("junk %d past the limit: %d", i, rec.Code)
		}
	}
	// The admin still passes, and a read-only refusal of the admin is a row of its own.
	if rec := readQueues(c, addr, bearer(consoleAdmin)); rec.Code != http.StatusOK {
		t.Fatalf("the admin after the junk: %d", rec.Code)
	}
	send(c, "POST", ConsolePath+"/api/queues/exports:pause", addr, bearer(consoleAdmin), nil)
	want := []string{"admin auth.sign_in success 303 ×1", "admin auth.sign_out success 303 ×1",
		" auth.sign_in denied 401 ×3", " auth.throttled denied 429 ×7", "admin console.refused denied 403 ×1"}
	if got := auditKinds(t, st); !slices.Equal(got, want) {
		t.Fatalf("audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	rows, _, _ := st.ListAudit(context.Background(), audit.Filter{Action: audit.ActionThrottled})
	if len(rows) != 1 || rows[0].ClientAddr != "198.51.100.8" || rows[0].Via != "console" {
		t.Fatalf("the throttled row %+v", rows)
	}
}

// Behind the trusted proxies the client is the address they name, for the throttle and the
// audit trail alike: one client's junk through the proxy throttles that client only, and a
// client naming itself in X-Forwarded-For from outside the proxies is not believed. A
// credential refused from many addresses is throttled from every address.
func TestConsoleThrottlesTheClientBehindTheProxiesAndTheCredentialEverywhere(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	gw, err := auth.NewGateway("", "", nil, []string{"10.0.0.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	pg := storetest.NewPostgres(t)
	st := store.New(pg.DB)
	c := e.console(ConsoleConfig{LoginFailures: 2, LoginWindow: time.Minute, Gateway: gw, Audit: st})
	const proxy = "10.0.0.5:4444"
	via := func(client string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("X-Forwarded-For", "203.0.113.200, "+client) }
	}
	for i := range 2 {
		readQueues(c, proxy, func(r *http.Request) { via("198.51.100.20")(r); bearer(fmt.Sprint("guess-", i))(r) })
	}
	blocked := readQueues(c, proxy, func(r *http.Request) { via("198.51.100.20")(r); bearer("guess-9")(r) })
	if blocked.Code != http.StatusTooManyRequests {
		t.Fatalf("the client behind the proxy after 2 refusals: %d", blocked.Code)
	}
	if rec := readQueues(c, proxy, func(r *http.Request) { via("198.51.100.21")(r); bearer("guess-10")(r) }); rec.Code != http.StatusUnauthorized {
		t.Fatalf("another client behind the same proxy: %d, want its own 401", rec.Code)
	}
	// From outside the proxies, X-Forwarded-For is the client's own claim: the peer counts.
	if rec := readQueues(c, "192.0.2.77:1", func(r *http.Request) { via("198.51.100.20")(r); bearer("guess-11")(r) }); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a client claiming a throttled address: %d", rec.Code)
	}
	rows, _, _ := st.ListAudit(context.Background(), audit.Filter{Action: audit.ActionThrottled})
	if len(rows) != 1 || rows[0].ClientAddr != "198.51.100.20" {
		t.Fatalf("throttled rows %+v, want one for the client behind the proxy", rows)
	}
	// One credential tried from two addresses: the third address waits too.
	for _, from := range []string{"192.0.2.1:1", "192.0.2.2:1"} {
		login(c, "the-one-guessed-token", from)
	}
	if rec := login(c, "the-one-guessed-token", "192.0.2.3:1"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a credential refused twice, from a third address: %d", rec.Code)
	}
	if rec := login(c, "a-different-guess", "192.0.2.3:1"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("another credential from that address: %d", rec.Code)
	}
	sessionOf(t, login(c, consoleAdmin, "192.0.2.3:1"))
}

// asynqmon has no sign-out control, so /monitor/logout is the console's way out: a GET shows
// a button and ends nothing (a link or an image on another site cannot sign an admin out),
// a POST from another site is refused, and the button's POST ends the session.
func TestConsoleSignOutIsAButton(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	c := e.console(ConsoleConfig{})
	ck := sessionOf(t, login(c, consoleAdmin, here))
	live := func() bool {
		return readQueues(c, here, withCookie(ck)).Code == http.StatusOK
	}

	rec := send(c, "GET", ConsolePath+"/logout", here, withCookie(ck), nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `<form method="post" action="/monitor/logout"`) {
		t.Fatalf("the sign-out page: %d %s", rec.Code, rec.Body)
	}
	if !live() {
		t.Fatal("showing the sign-out page ended the session")
	}
	crossSite := func(r *http.Request) { withCookie(ck)(r); r.Header.Set("Sec-Fetch-Site", "cross-site") }
	if rec := send(c, "POST", ConsolePath+"/logout", here, crossSite, nil); rec.Code != http.StatusForbidden {
		t.Fatalf("a sign-out posted from another site: %d", rec.Code)
	}
	if !live() {
		t.Fatal("a sign-out from another site ended the session")
	}
	sameOrigin := func(r *http.Request) { withCookie(ck)(r); r.Header.Set("Sec-Fetch-Site", "same-origin") }
	if rec := send(c, "POST", ConsolePath+"/logout", here, sameOrigin, nil); rec.Code != http.StatusSeeOther ||
		rec.Header().Get("Location") != ConsolePath+"/login" {
		t.Fatalf("the button's sign-out: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	if live() {
		t.Fatal("the session outlived the sign-out")
	}
}
