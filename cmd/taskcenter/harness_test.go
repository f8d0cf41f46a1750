package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/httpapi"
	"github.com/taskcenter/taskcenter/internal/contracttest"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// Demo tokens from configs/taskcenter.yaml.
const (
	aliceToken = "demo-user-token-alice"
	bobToken   = "demo-user-token-bob00"
	adminToken = "demo-admin-token-ops0"
)

// env is one test's world: its own schema, Redis database and data dir, shared by every
// taskcenter process the test starts.
type env struct {
	t       *testing.T
	pg      *storetest.Postgres
	redis   *testenv.Redis
	dataDir string
	vars    map[string]string
	types   []TypeMaker // task types the test adds beside the built-in ones
}

func newEnv(t *testing.T, overrides map[string]string) *env {
	t.Helper()
	return newEnvOn(t, storetest.NewPostgres(t), testenv.NewRedis(t), map[string]string{
		"TASKCENTER_CONFIG":                    "../../configs/taskcenter.yaml",
		"TASKCENTER_LOG_LEVEL":                 "debug",
		"TASKCENTER_WORKER_HEARTBEAT_INTERVAL": "200ms",
		"TASKCENTER_WORKER_TAKEOVER_AFTER":     "1s",
		// As long as a 1 s takeover window allows: a loaded test machine can pause a worker
		// between a batch's statements for longer than the default third of it.
		"TASKCENTER_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": "750ms",
		"TASKCENTER_DATABASE_LOCK_TIMEOUT":                "900ms",
		"TASKCENTER_WORKER_PROGRESS_INTERVAL":             "50ms",
		"TASKCENTER_WORKER_SHUTDOWN_TIMEOUT":              "5s",
		"TASKCENTER_TYPES_EXPORT_CUSTOMERS_RETRY_BASE":    "100ms",
		"TASKCENTER_TYPES_EXPORT_TASKS_RETRY_BASE":        "100ms",
	}, overrides)
}

// newEnvOn is a world on pg and rd with a data dir of its own: its processes use those,
// listen on free ports, and run with settings, then overrides.
func newEnvOn(t *testing.T, pg *storetest.Postgres, rd *testenv.Redis, settings, overrides map[string]string) *env {
	t.Helper()
	e := &env{t: t, pg: pg, redis: rd, dataDir: t.TempDir()}
	e.vars = merge(map[string]string{
		"TASKCENTER_DATABASE_URL":            pg.URL,
		"TASKCENTER_DATABASE_MAX_OPEN_CONNS": "10",
		"TASKCENTER_REDIS_ADDR":              rd.Addr,
		"TASKCENTER_REDIS_DB":                strconv.Itoa(rd.DB),
		"TASKCENTER_DATA_DIR":                e.dataDir,
		"TASKCENTER_HTTP_ADDR":               "127.0.0.1:0",
		"TASKCENTER_METRICS_ADDR":            "127.0.0.1:0",
	}, settings, overrides)
	return e
}

// contract is the served OpenAPI document: every exchange these tests make with the API
// through a checked client is held to it.
var contract = sync.OnceValues(func() (*contracttest.Contract, error) { return contracttest.Load(httpapi.OpenAPI()) })

// checkedClient is an HTTP client whose exchanges with the API are checked against the
// document (a contradiction fails t).
func checkedClient(t testing.TB) *http.Client {
	t.Helper()
	c, err := contract()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	return c.Client(t)
}

// proc is one running taskcenter process (run in a goroutine, as main would).
type proc struct {
	t      *testing.T
	client *http.Client // checked against the API's document
	base   string
	cancel context.CancelFunc
	done   chan error
	logs   *logBuffer
}

// start runs `taskcenter serve --roles roles` and waits until it listens (when it has the
// api role) or has started its workers.
func (e *env) start(roles string) *proc {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := newLogBuffer()
	p := &proc{t: e.t, client: checkedClient(e.t), cancel: cancel, done: make(chan error, 1), logs: logs}
	getenv := func(k string) string { return e.vars[k] }
	go func() { p.done <- runWith(ctx, []string{"serve", "--roles", roles}, getenv, logs, e.types...) }()
	e.t.Cleanup(func() {
		p.stop()
		if e.t.Failed() {
			e.t.Logf("logs of %s process:\n%s", roles, logs.String())
		}
	})
	p.base = waitReady(e.t, roles, logs, p.done)
	return p
}

// stop shuts the process down as SIGTERM would and returns run's error.
func (p *proc) stop() error {
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(30 * time.Second):
		p.t.Errorf("process did not stop within 30s")
		return nil
	}
}

// response is an HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %d response %q: %v", r.status, r.body, err)
	}
}

// do sends a request with a bearer token and a JSON body (when body is not nil).
func (p *proc) do(method, path, token string, body any, headers ...string) response {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := p.client.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// taskJSON is the subset of the task view tests read.
type taskJSON struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Status   string `json:"status"`
	Owner    string `json:"owner"`
	Attempt  int    `json:"attempt"`
	Retry    int    `json:"retry_count"`
	Cancel   bool   `json:"cancel_requested"`
	Progress struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
		Percent int   `json:"percent"`
	} `json:"progress"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Result *struct {
		Name    string `json:"name"`
		Rows    int64  `json:"rows"`
		Expired bool   `json:"expired"`
		Summary *struct {
			Total   int64 `json:"total"`
			Success int64 `json:"success"`
			Failed  int64 `json:"failed"`
		} `json:"summary"`
		FirstErrors []string `json:"first_errors"`
	} `json:"result"`
	Counts struct {
		Total   int64 `json:"total"`
		Success int64 `json:"success"`
		Failed  int64 `json:"failed"`
	} `json:"counts"`
	Links    map[string]string `json:"links"`
	Attempts []struct {
		Attempt int    `json:"attempt"`
		Trigger string `json:"trigger"`
		Status  string `json:"status"`
		Error   string `json:"error"`
	} `json:"attempts"`
	Logs []struct {
		Message string `json:"message"`
	} `json:"logs"`
}

func (p *proc) submitExport(token string, body any, headers ...string) taskJSON {
	p.t.Helper()
	res := p.do("POST", "/api/v1/exports", token, body, headers...)
	if res.status != http.StatusAccepted {
		p.t.Fatalf("submit export: %d %s", res.status, res.body)
	}
	var out struct{ Task taskJSON }
	res.json(p.t, &out)
	return out.Task
}

// getJSON reads path as the token's user into v, failing the test on any answer but 200.
func (p *proc) getJSON(path, token string, v any) {
	p.t.Helper()
	res := p.do("GET", path, token, nil)
	if res.status != http.StatusOK {
		p.t.Fatalf("GET %s: %d %s", path, res.status, res.body)
	}
	res.json(p.t, v)
}

func (p *proc) task(token, id string) taskJSON {
	p.t.Helper()
	var t taskJSON
	p.getJSON("/api/v1/tasks/"+id, token, &t)
	return t
}

// waitStatus polls the task until it reaches one of the statuses.
func (p *proc) waitStatus(token, id string, within time.Duration, statuses ...string) taskJSON {
	p.t.Helper()
	var last taskJSON
	testenv.Eventually(p.t, within, fmt.Sprintf("task %s to become %v", id, statuses), func() bool {
		last = p.task(token, id)
		for _, s := range statuses {
			if last.Status == s {
				return true
			}
		}
		return false
	})
	return last
}

// waitUnderWay waits until the task is RUNNING and has made progress.
func (p *proc) waitUnderWay(token, id string) {
	p.t.Helper()
	testenv.Eventually(p.t, 30*time.Second, "task "+id+" to be under way", func() bool {
		got := p.task(token, id)
		return got.Status == "RUNNING" && got.Progress.Current > 0
	})
}

// seedCustomers inserts n customers with codes C000001…; extra rows are appended as given.
func (e *env) seedCustomers(n int, extra ...[3]string) {
	e.t.Helper()
	_, err := e.pg.DB.ExecContext(context.Background(), `
		INSERT INTO customers (code, name, phone, email, city, level)
		SELECT 'C' || lpad(g::text, 6, '0'), 'Customer ' || g, '138' || lpad(g::text, 8, '0'), 'c' || g || '@example.com', 'Shanghai', 'gold'
		FROM generate_series(1, ?) g`, n)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, x := range extra {
		if _, err := e.pg.DB.ExecContext(context.Background(),
			`INSERT INTO customers (code, name, phone, city) VALUES (?, ?, ?, '')`, x[0], x[1], x[2]); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) db() *bun.DB { return e.pg.DB }

func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	storetest.Exec(e.t, e.pg.DB, q, args...)
}

func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	return storetest.Count(e.t, e.pg.DB, q, args...)
}

func (e *env) runs(taskNo string) []store.Run {
	e.t.Helper()
	var runs []store.Run
	err := e.pg.DB.NewSelect().Model(&runs).Where("task_id = (SELECT id FROM tasks WHERE task_no = ?)", taskNo).Order("attempt").Scan(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}

func (e *env) inspector() *asynq.Inspector {
	return asynq.NewInspector(asynq.RedisClientOpt{Addr: e.redis.Addr, DB: e.redis.DB})
}

// logBuffer collects a process's log lines and lets tests wait for one.
type logBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines []string
	part  []byte
	cond  chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{cond: make(chan struct{}, 1)} }

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(b)
	l.part = append(l.part, b...)
	sc := bufio.NewScanner(bytes.NewReader(l.part))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	consumed := 0
	for sc.Scan() {
		line := sc.Text()
		if consumed+len(line) >= len(l.part) { // no newline yet
			break
		}
		l.lines = append(l.lines, line)
		consumed += len(line) + 1
	}
	l.part = l.part[consumed:]
	select {
	case l.cond <- struct{}{}:
	default:
	}
	return len(b), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// matching returns the lines containing every one of subs.
func (l *logBuffer) matching(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuffer) waitFor(t *testing.T, within time.Duration, sub string, exited <-chan error) string {
	t.Helper()
	deadline := time.After(within)
	for {
		if m := l.matching(sub); len(m) > 0 {
			return m[0]
		}
		select {
		case err := <-exited:
			t.Fatalf("process exited before logging %q: %v\n%s", sub, err, l.String())
		case <-deadline:
			t.Fatalf("no %q log line within %s\n%s", sub, within, l.String())
		case <-l.cond:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// binProc is a taskcenter process started from the built binary, to be killed for real.
type binProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string
	logs *logBuffer
	exit chan error
}

// startBinary runs the built binary with the env's settings.
func (e *env) startBinary(roles string) *binProc {
	e.t.Helper()
	cmd := exec.Command(binary, "serve", "--roles", roles)
	for k, v := range e.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	logs := newLogBuffer()
	cmd.Stdout = logs
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &binProc{t: e.t, cmd: cmd, logs: logs, exit: make(chan error, 1)}
	go func() { p.exit <- cmd.Wait() }()
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exit
		p.exit <- nil
		if e.t.Failed() {
			e.t.Logf("logs of binary %s (pid %d):\n%s", roles, cmd.Process.Pid, logs.String())
		}
	})
	p.base = waitReady(e.t, roles, logs, p.exit)
	return p
}

// signal sends sig and, unless it is SIGKILL, waits for the exit and returns its error.
func (p *binProc) signal(sig os.Signal, within time.Duration) error {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.exit:
		p.exit <- err
		return err
	case <-time.After(within):
		p.t.Fatalf("process did not exit within %s of %v", within, sig)
		return nil
	}
}

// upload posts a multipart import: the file's bytes under filename, plus form fields and
// request headers given as name, value pairs (Accept-Language).
func (p *proc) upload(token, filename string, content []byte, fields map[string]string, headers ...string) response {
	p.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		mw.WriteField(k, v) //nolint:errcheck
	}
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		p.t.Fatal(err)
	}
	fw.Write(content) //nolint:errcheck
	mw.Close()
	req, _ := http.NewRequest("POST", p.base+"/api/v1/imports", &body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := p.client.Do(req)
	if err != nil {
		p.t.Fatalf("upload %s: %v", filename, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// submitImport uploads and expects a new task.
func (p *proc) submitImport(token, filename string, content []byte, fields map[string]string) taskJSON {
	p.t.Helper()
	res := p.upload(token, filename, content, fields)
	if res.status != http.StatusAccepted {
		p.t.Fatalf("import %s: %d %s", filename, res.status, res.body)
	}
	var out struct{ Task taskJSON }
	res.json(p.t, &out)
	return out.Task
}

// items returns a task's rejected rows: row number → message.
func (e *env) items(taskNo string) map[int]string {
	e.t.Helper()
	var rows []struct {
		Row     int    `bun:"row_no"`
		Message string `bun:"message"`
	}
	err := e.pg.DB.NewRaw("SELECT row_no, message FROM task_items WHERE task_id = (SELECT id FROM tasks WHERE task_no = ?) ORDER BY row_no", taskNo).
		Scan(context.Background(), &rows)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int]string{}
	for _, r := range rows {
		if _, dup := out[r.Row]; dup {
			e.t.Fatalf("row %d was rejected twice", r.Row)
		}
		out[r.Row] = r.Message
	}
	return out
}

// waitReady waits until a process with these roles is up, and returns its API base URL
// (empty without the api role).
func waitReady(t *testing.T, roles string, logs *logBuffer, exited <-chan error) string {
	t.Helper()
	want := "workers started"
	switch {
	case strings.Contains(roles, "api") || roles == "all":
		want = "http listening"
	case roles == "scheduler":
		want = "scheduler started"
	}
	line := logs.waitFor(t, 30*time.Second, want, exited)
	var rec struct{ Addr string }
	json.Unmarshal([]byte(line), &rec) //nolint:errcheck
	if rec.Addr == "" {
		return ""
	}
	return "http://" + rec.Addr
}
