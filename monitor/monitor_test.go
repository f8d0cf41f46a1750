package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

func TestLoggerMasksSensitiveValues(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := NewLogger("json", "info", &buf, "/srv/tc")
	log.Info("row rejected", "detail", "row 9, phone 13800138000 already used", "token", "demo-admin-token-ops0",
		"err", errors.New("open /etc/shadow: permission denied"), "file", "/srv/tc/uploads/ab.xlsx", "took", 1500*time.Millisecond,
		"route", "GET /api/v1/tasks/{id}", "tmp_path", "/tmp/elsewhere/x", "issuer", "http://127.0.0.1:18500",
		"cause", errors.New(`Get "http://127.0.0.1:18500/token?code=SplxlOBeZQQYbYS6WxSbIA": connection refused`),
		"database", "postgres://tc:hunter2pw@db:5432/tc")
	out := buf.String()
	for _, leaked := range []string{"13800138000", "demo-admin-token-ops0", "/etc/shadow", "/tmp/elsewhere", "SplxlOBeZQQYbYS6WxSbIA", "hunter2pw"} {
		if strings.Contains(out, leaked) {
			t.Errorf("log line leaks %q: %s", leaked, out)
		}
	}
	for _, kept := range []string{"138****8000", `"token":"***"`, "open <path>: permission denied", "/srv/tc/uploads/ab.xlsx", `"took":"1.5s"`, `"route":"GET /api/v1/tasks/{id}"`,
		`"issuer":"http://127.0.0.1:18500"`, `http://127.0.0.1:18500/token?code=***`, `"database":"postgres://tc:***@db:5432/tc"`} {
		if !strings.Contains(out, kept) {
			t.Errorf("log line lacks %q: %s", kept, out)
		}
	}
}

func quietLogger() (*slog.Logger, *testenv.SyncBuffer) {
	b := &testenv.SyncBuffer{}
	return slog.New(slog.NewJSONHandler(b, nil)), b
}

func TestAlertWebhookRetriesAndDeliversOnce(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	got := make(chan AlertEvent, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "try later", http.StatusBadGateway)
			return
		}
		var ev AlertEvent
		json.NewDecoder(r.Body).Decode(&ev) //nolint:errcheck
		got <- ev
	}))
	defer srv.Close()
	logger, logs := quietLogger()
	a := NewAlerter(AlertConfig{WebhookURL: srv.URL, WebhookTimeout: time.Second, WebhookRetries: 2}, nil, logger)
	a.TaskFailed(context.Background(), jobs.Alert{TaskNo: "tsk_1", Type: "export:customers", Owner: "alice", Attempts: 4, Message: "db down"})
	a.Close(10 * time.Second)
	select {
	case ev := <-got:
		if ev.Kind != "task_failed" || ev.TaskNo != "tsk_1" || !strings.Contains(ev.Summary, "failed after 4 attempts") {
			t.Fatalf("webhook got %+v", ev)
		}
	default:
		t.Fatal("the webhook never received the alert")
	}
	if calls.Load() != 2 || len(got) != 0 {
		t.Fatalf("webhook called %d times, want 2 (one failure, one delivery)", calls.Load())
	}
	if n := strings.Count(logs.String(), `"msg":"ALERT `); n != 1 {
		t.Fatalf("alert logged %d times, want once:\n%s", n, logs.String())
	}
}

func TestAHangingWebhookNeverBlocksTheCaller(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	logger, logs := quietLogger()
	a := NewAlerter(AlertConfig{WebhookURL: srv.URL, WebhookTimeout: time.Hour, WebhookRetries: 0}, nil, logger)
	// The sender is stuck on the first alert; the queue holds 256 more; the rest are dropped,
	// and every raise returns at once (were it to block, this loop would never end).
	for range 400 {
		a.TaskFailed(context.Background(), jobs.Alert{TaskNo: "tsk_x"})
	}
	if !strings.Contains(logs.String(), "alert webhook queue is full") {
		t.Fatal("no drop was logged")
	}
	if n := strings.Count(logs.String(), `"msg":"ALERT `); n != 400 {
		t.Fatalf("%d alerts logged, want all 400", n)
	}
}

// promtool runs Prometheus' promtool, which `make test` installs.
func promtool(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run the tests through `make test`, which installs Debian's prometheus package")
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestMetricsFollowPrometheusConventions(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPostgres(t)
	rd := testenv.NewRedis(t)
	st := store.New(pg.DB)
	client := asynq.NewClientFromRedisClient(rd.Client)
	if _, err := client.Enqueue(asynq.NewTask("export:customers", nil), asynq.Queue("exports")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Create(context.Background(), store.NewTask{TaskNo: "tsk_m", Type: "export:customers", Owner: "a", Queue: "exports", MaxRetry: 1, TimeoutSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(asynq.NewInspectorFromRedisClient(rd.Client), []string{"exports", "imports"}, st)
	m.TaskSubmitted("export:customers")
	m.AttemptStarted("export:customers", "takeover")
	m.TaskFinished("export:customers", store.StatusSuccess, task.CauseNone, 3*time.Second)
	m.RowsProcessed("import:customers", 990, 10)
	m.CleanupRound(cleanup.Report{Orphans: 2, TimedOut: 1})
	m.AlertRaised("task_failed")
	m.ObserveHTTP("GET /api/v1/tasks/{id}", 200, 3*time.Millisecond)
	claims := m.Writes("claim")
	claims.Flushed(11, 3*time.Millisecond)
	claims.Waited(5 * time.Millisecond)
	claims.Waited(4 * time.Millisecond)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.Bytes()
	if out := promtool(t, body, "check", "metrics"); strings.TrimSpace(out) != "" {
		t.Fatalf("promtool check metrics found problems:\n%s", out)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels map[string]string) float64 {
		f, ok := families[name]
		if !ok {
			t.Fatalf("metric %s is missing", name)
		}
	next:
		for _, mt := range f.Metric {
			for _, lp := range mt.Label {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			switch {
			case mt.Counter != nil:
				return mt.Counter.GetValue()
			case mt.Gauge != nil:
				return mt.Gauge.GetValue()
			case mt.Histogram != nil:
				return float64(mt.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("metric %s has no series %v", name, labels)
		return 0
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"taskcenter_tasks_submitted_total", map[string]string{"type": "export:customers"}, 1},
		{"taskcenter_task_takeovers_total", map[string]string{"type": "export:customers"}, 1},
		{"taskcenter_tasks_finished_total", map[string]string{"status": "SUCCESS"}, 1},
		{"taskcenter_task_duration_seconds", map[string]string{"type": "export:customers"}, 1},
		{"taskcenter_rows_total", map[string]string{"result": "failed"}, 10},
		{"taskcenter_orphans_reenqueued_total", nil, 2},
		{"taskcenter_heartbeat_timeouts_total", nil, 1},
		{"taskcenter_http_request_duration_seconds", map[string]string{"code": "200"}, 1},
		{"taskcenter_queue_tasks", map[string]string{"queue": "exports", "state": "pending"}, 1},
		{"taskcenter_queue_scrape_success", map[string]string{"queue": "exports"}, 1},
		{"taskcenter_tasks_waiting", map[string]string{"queue": "exports"}, 1},
		{"taskcenter_owner_tasks_waiting_max", map[string]string{"queue": "exports"}, 1},
		{"taskcenter_write_batch_seconds", map[string]string{"kind": "claim"}, 1},
		{"taskcenter_write_batch_rows", map[string]string{"kind": "claim"}, 1},
		{"taskcenter_write_wait_seconds", map[string]string{"kind": "claim"}, 2},
	}
	for _, c := range checks {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// No user name reaches a label value: the task's owner "a" is in no series.
	for name, f := range families {
		for _, mt := range f.Metric {
			for _, lp := range mt.Label {
				if lp.GetName() == "owner" || lp.GetName() == "user" || lp.GetValue() == "a" {
					t.Errorf("%s carries a user: %s=%q", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}

func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	promtool(t, nil, "check", "rules", "../configs/prometheus-rules.yml")
	promtool(t, nil, "test", "rules", "../configs/prometheus-rules.test.yml")
}

func TestConsoleIsForAdminsOnly(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	client := asynq.NewClientFromRedisClient(rd.Client)
	if _, err := client.Enqueue(asynq.NewTask("export:customers", nil), asynq.Queue("exports")); err != nil {
		t.Fatal(err)
	}
	conn := asynq.RedisClientOpt{Addr: rd.Addr, DB: rd.DB}
	admin := "admin-token-0123456789"
	console := func(cfg ConsoleConfig) *httptest.Server {
		cfg.AdminTokens = []string{admin}
		cfg.SessionTTL = time.Hour
		c := NewConsole(conn, cfg)
		mux := http.NewServeMux()
		mux.Handle(ConsolePath+"/", c.Handler())
		srv := httptest.NewServer(mux)
		t.Cleanup(func() { srv.Close(); c.Close() })
		return srv
	}
	srv := console(ConsoleConfig{Username: "ops", Password: "correct horse battery"})
	noRedirect := testenv.NoRedirects()
	get := func(c *http.Client, path string, set func(*http.Request)) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if set != nil {
			set(req)
		}
		return testenv.Send(t, c, req)
	}
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}

	if res, body := get(noRedirect, "/monitor/api/queues", bearer(admin)); res.StatusCode != 200 || !strings.Contains(body, `"queue":"exports"`) {
		t.Fatalf("admin token: %d %s", res.StatusCode, body)
	}
	if res, _ := get(noRedirect, "/monitor/api/queues", bearer("demo-user-token-alice")); res.StatusCode != 401 {
		t.Fatalf("user token: %d, want 401", res.StatusCode)
	}
	if res, _ := get(noRedirect, "/monitor/api/queues", nil); res.StatusCode != 401 || res.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no credentials: %d", res.StatusCode)
	}
	if res, _ := get(noRedirect, "/monitor/", func(r *http.Request) { r.Header.Set("Accept", "text/html") }); res.StatusCode != 303 || res.Header.Get("Location") != "/monitor/login" {
		t.Fatalf("a browser without a session: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := get(noRedirect, "/monitor/api/queues", func(r *http.Request) { r.SetBasicAuth("ops", "correct horse battery") }); res.StatusCode != 200 {
		t.Fatalf("basic auth: %d", res.StatusCode)
	}
	if res, _ := get(noRedirect, "/monitor/api/queues", func(r *http.Request) { r.SetBasicAuth("ops", "wrong") }); res.StatusCode != 401 {
		t.Fatalf("wrong basic auth: %d", res.StatusCode)
	}

	// The login page: a user token is refused, the admin token opens a session.
	post := func(token string) *http.Response {
		res, err := noRedirect.PostForm(srv.URL+"/monitor/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := post("demo-user-token-alice"); res.StatusCode != 401 || len(res.Cookies()) != 0 {
		t.Fatalf("login with a user token: %d", res.StatusCode)
	}
	res := post(admin)
	if res.StatusCode != 303 || len(res.Cookies()) != 1 || !res.Cookies()[0].HttpOnly {
		t.Fatalf("login with the admin token: %d %v", res.StatusCode, res.Cookies())
	}
	session := res.Cookies()[0]
	withSession := func(r *http.Request) { r.AddCookie(session) }
	res, body := get(noRedirect, "/monitor/", withSession)
	if res.StatusCode != 200 || !strings.Contains(body, `/monitor`) || !strings.Contains(body, "<html") {
		t.Fatalf("console page with a session: %d %.300s", res.StatusCode, body)
	}
	forged := &http.Cookie{Name: session.Name, Value: "9999999999.forged"}
	if res, _ := get(noRedirect, "/monitor/api/queues", func(r *http.Request) { r.AddCookie(forged) }); res.StatusCode != 401 {
		t.Fatalf("forged session: %d", res.StatusCode)
	}

	ro := console(ConsoleConfig{ReadOnly: true})
	req, _ := http.NewRequest("DELETE", ro.URL+"/monitor/api/queues/exports/pending_tasks:batch_delete", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("read-only console let a DELETE through: %v %v", res.StatusCode, err)
	}
}

func TestBacklogAlertFiresOncePerEpisode(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPostgres(t)
	rd := testenv.NewRedis(t)
	st := store.New(pg.DB)
	for i := range 3 {
		if _, _, err := st.Create(context.Background(), store.NewTask{TaskNo: "tsk_b" + string(rune('a'+i)), Type: "export:customers",
			Owner: "a", Queue: "exports", MaxRetry: 1, TimeoutSeconds: 60}); err != nil {
			t.Fatal(err)
		}
	}
	logger, logs := quietLogger()
	alerter := NewAlerter(AlertConfig{}, nil, logger)
	sched, _ := cleanup.ParseSpec("@every 1s")
	dir := t.TempDir()
	fs, err := storage.New(context.Background(), storage.Config{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	c := cleanup.New(cleanup.Config{Schedule: sched, Location: time.UTC, OrphanGrace: time.Hour, TakeoverAfter: time.Minute, BatchSize: 10,
		UploadTTL: time.Hour, TempTTL: time.Hour, Retention: time.Hour, BacklogThreshold: 2, BacklogFor: 0, Queues: []string{"exports"}},
		"test", cleanup.Deps{Store: st, Enqueuer: jobs.NewEnqueuer(asynq.NewClientFromRedisClient(rd.Client), asynq.NewInspectorFromRedisClient(rd.Client), nil),
			Files: fs, Alerter: alerter, Logger: logger})
	for range 3 {
		c.Round(context.Background())
	}
	if n := strings.Count(logs.String(), `"alert":"backlog_high"`); n != 1 {
		t.Fatalf("backlog alerts over three rounds = %d, want 1", n)
	}
	// The backlog clears, then builds up again: a new episode, a new alert.
	pg.DB.ExecContext(context.Background(), "UPDATE tasks SET status = 'CANCELLED', finished_at = now()") //nolint:errcheck
	c.Round(context.Background())
	pg.DB.ExecContext(context.Background(), "UPDATE tasks SET status = 'PENDING', finished_at = NULL") //nolint:errcheck
	c.Round(context.Background())
	if n := strings.Count(logs.String(), `"alert":"backlog_high"`); n != 2 {
		t.Fatalf("alerts after a second episode = %d, want 2", n)
	}
}
