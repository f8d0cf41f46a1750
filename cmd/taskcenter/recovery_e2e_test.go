package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
)

// fastCleanup makes cleanup rounds run every second with a one-second orphan grace.
var fastCleanup = map[string]string{
	"TASKCENTER_CLEANUP_SPEC":         "@every 1s",
	"TASKCENTER_CLEANUP_ORPHAN_GRACE": "1s",
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// startThenCutRedis starts a process with these roles whose Redis traffic goes through a
// proxy, and once it is up cuts Redis off; the test restores the proxy when Redis is to
// answer again. Processes e starts later go through the same proxy.
func (e *env) startThenCutRedis(roles string) (*proc, *testenv.Proxy) {
	e.t.Helper()
	proxy := testenv.NewProxy(e.t, e.redis.Addr)
	e.vars["TASKCENTER_REDIS_ADDR"] = proxy.Addr()
	p := e.start(roles)
	proxy.Cut()
	return p, proxy
}

func TestTwoSchedulersRunEachSlotOnce(t *testing.T) {
	t.Parallel()
	e, a := startEnv(t, fastCleanup, "scheduler,worker")
	b := e.start("scheduler,worker")
	testenv.Eventually(t, 30*time.Second, "five cleanup rounds", func() bool {
		return e.count("SELECT count(*) FROM cleanup_rounds WHERE finished_at IS NOT NULL") >= 5
	})
	a.stop()
	b.stop()
	rounds := e.count("SELECT count(*) FROM cleanup_rounds")
	started := len(a.logs.matching(`"cleanup round started"`)) + len(b.logs.matching(`"cleanup round started"`))
	skipped := len(a.logs.matching("cleanup slot already taken")) + len(b.logs.matching("cleanup slot already taken"))
	if started != rounds {
		t.Fatalf("%d rounds started across both schedulers, %d slots recorded: some slot ran twice", started, rounds)
	}
	if skipped == 0 {
		t.Fatal("no duplicate cleanup job was ever refused: the test did not exercise two schedulers")
	}
	t.Logf("%d slots, each run once; %d duplicate jobs refused by the guard", rounds, skipped)
}

func TestWorkerKilledMidExportIsTakenOverAndFinishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, merge(fastCleanup, map[string]string{"TASKCENTER_EXPORT_PAGE_SIZE": "20"}))
	// 600 pages of 20: long enough to be killed mid-way, short enough to run twice.
	e.seedCustomers(12000)
	api := e.start("api,scheduler")
	doomed := e.startBinary("worker")
	task := api.exportUnderWay()
	doomed.signal(syscall.SIGKILL, 10*time.Second)

	e.start("worker")
	final := api.waitStatus(aliceToken, task.ID, 3*time.Minute, "SUCCESS", "FAILED")
	if final.Status != "SUCCESS" || final.Result.Rows != 12000 {
		t.Fatalf("after the kill: %+v", final)
	}
	if !final.takenOverThenEnded("SUCCESS") {
		t.Fatalf("attempts = %+v, want the killed one superseded, a takeover, and only retries after a temporary database error before the success", final.Attempts)
	}
	// One result file: the killed attempt never committed its half-written one.
	results, _ := filepath.Glob(filepath.Join(e.dataDir, "results", "*"))
	if len(results) != 1 {
		t.Fatalf("result files = %v, want exactly one", results)
	}
	rows := readSheet(t, api.do("GET", final.Links["result"], aliceToken, nil).body)
	if len(rows) != 12001 {
		t.Fatalf("sheet rows = %d, want 12001", len(rows))
	}
}

func TestSIGTERMDuringALongTaskHandsItBackAndExitsZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"TASKCENTER_EXPORT_PAGE_SIZE": "20", "TASKCENTER_WORKER_SHUTDOWN_TIMEOUT": "10s"})
	e.seedCustomers(16000)
	w := e.startBinary("all")
	p := &proc{t: t, client: checkedClient(t), base: w.base}
	task := p.exportUnderWay()
	began := time.Now()
	if err := w.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v (want status 0)", err)
	}
	t.Logf("stopped %s after SIGTERM", time.Since(began))
	if n := len(w.logs.matching("attempt interrupted; task handed back")); n != 1 {
		t.Fatalf("handed-back lines = %d, want 1", n)
	}
	var st store.Status
	if err := e.db().NewRaw("SELECT status FROM tasks WHERE task_no = ?", task.ID).Scan(context.Background(), &st); err != nil || st != store.StatusRetryWait {
		t.Fatalf("after SIGTERM the task is %s (%v), want RETRY_WAIT to resume", st, err)
	}

	next := e.start("all")
	final := next.waitStatus(aliceToken, task.ID, 3*time.Minute, "SUCCESS", "FAILED")
	if final.Status != "SUCCESS" || final.Retry != 0 || len(final.Attempts) != 2 ||
		final.Attempts[0].Status != "INTERRUPTED" || final.Attempts[1].Trigger != "resume" || final.Result.Rows != 16000 {
		t.Fatalf("after restart: %+v", final)
	}
}

func TestRedisLosingItsDataReenqueuesLiveTasksOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastCleanup)
	e.seedCustomers(50)
	api := e.start("api")
	// One task finishes before the loss; it must never run again.
	done := func() taskJSON {
		w := e.start("worker")
		tk := api.submitExport(aliceToken, map[string]any{"type": "customers"})
		api.waitStatus(aliceToken, tk.ID, 30*time.Second, "SUCCESS")
		w.stop()
		return tk
	}()
	var waiting []taskJSON
	for range 3 {
		waiting = append(waiting, api.submitExport(aliceToken, map[string]any{"type": "customers"}))
	}
	time.Sleep(1100 * time.Millisecond) // past the orphan grace of their first hand-off
	if err := e.redis.Client.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	e.start("worker,scheduler")
	for _, tk := range waiting {
		api.waitStatus(aliceToken, tk.ID, 3*time.Minute, "SUCCESS")
	}
	var reports []json.RawMessage
	if err := e.db().NewRaw("SELECT report FROM cleanup_rounds WHERE report IS NOT NULL ORDER BY slot LIMIT 2").Scan(context.Background(), &reports); err != nil {
		t.Fatal(err)
	}
	enqueued := 0
	for _, r := range reports {
		var rep struct {
			Orphans int `json:"orphans_enqueued"`
		}
		json.Unmarshal(r, &rep) //nolint:errcheck
		enqueued += rep.Orphans
	}
	if enqueued != 3 {
		t.Fatalf("the first two cleanup rounds re-enqueued %d tasks, want the 3 waiting ones (reports %s)", enqueued, reports)
	}
	if runs := e.runs(done.ID); len(runs) != 1 {
		t.Fatalf("the finished task ran again: %d runs", len(runs))
	}
}

func TestPostgresOutageAnswers503AndTheTaskFinishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, merge(fastCleanup, map[string]string{"TASKCENTER_EXPORT_PAGE_SIZE": "20"}))
	e.seedCustomers(20000)
	pgProxy := testenv.NewProxy(t, strings.Split(strings.SplitN(e.pg.URL, "@", 2)[1], "/")[0])
	e.vars["TASKCENTER_DATABASE_URL"] = strings.Replace(e.pg.URL, "127.0.0.1:5432", pgProxy.Addr(), 1)
	if !strings.Contains(e.vars["TASKCENTER_DATABASE_URL"], pgProxy.Addr()) {
		t.Skipf("test Postgres is not at 127.0.0.1:5432 (%s)", e.pg.URL)
	}
	p := e.start("all")
	task := p.exportUnderWay()

	pgProxy.Cut()
	if res := p.do("GET", "/readyz", "", nil); res.status != http.StatusServiceUnavailable || !strings.Contains(string(res.body), `"postgres":"unavailable"`) {
		t.Errorf("readyz while Postgres is down: %d %s", res.status, res.body)
	}
	for _, path := range []string{"/api/v1/tasks", "/api/v1/tasks/" + task.ID} {
		res := p.do("GET", path, aliceToken, nil)
		body := strings.ToLower(string(res.body))
		if res.status != http.StatusServiceUnavailable || strings.Contains(body, "dial") || strings.Contains(body, "select") || strings.Contains(body, "sql") {
			t.Errorf("GET %s while Postgres is down: %d %s, want a 503 without internals", path, res.status, res.body)
		}
		// The 503 names the part that failed.
		if !strings.Contains(body, `"code":"database_`) || !strings.Contains(body, "the task database") {
			t.Errorf("GET %s while Postgres is down: %s, want a database_unavailable (or _timeout) problem naming the task database", path, res.body)
		}
	}
	if res := p.do("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"}); res.status != http.StatusServiceUnavailable {
		t.Errorf("submit while Postgres is down: %d %s", res.status, res.body)
	}
	time.Sleep(2 * time.Second) // the outage lasts a while
	select {
	case err := <-p.done:
		t.Fatalf("the process exited during the outage: %v", err)
	default:
	}
	pgProxy.Restore()

	final := p.waitStatus(aliceToken, task.ID, 90*time.Second, "SUCCESS", "FAILED")
	if final.Status != "SUCCESS" || final.Result.Rows != 20000 {
		t.Fatalf("after the outage: %+v", final)
	}
	if res := p.do("GET", "/readyz", "", nil); res.status != http.StatusOK {
		t.Fatalf("readyz after the outage: %d", res.status)
	}
}

func TestRedisOutageStillAcceptsSubmitsAndRunsThemAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastCleanup)
	e.seedCustomers(100)
	p, redisProxy := e.startThenCutRedis("all")

	began := time.Now()
	res := p.do("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"})
	t.Logf("submit with Redis down answered %d in %s", res.status, time.Since(began))
	var sub struct{ Task taskJSON }
	switch res.status {
	case http.StatusAccepted:
		res.json(t, &sub)
		if n := e.count("SELECT count(*) FROM tasks WHERE task_no = ? AND status = 'PENDING'", sub.Task.ID); n != 1 {
			t.Fatalf("accepted task is not committed PENDING")
		}
	case http.StatusServiceUnavailable:
		t.Fatalf("submit was refused; this implementation commits and enqueues later, so it should accept")
	default:
		t.Fatalf("submit with Redis down: %d %s", res.status, res.body)
	}
	if res := p.do("GET", "/readyz", "", nil); res.status != http.StatusServiceUnavailable {
		t.Errorf("readyz with Redis down: %d", res.status)
	}
	if res := p.do("GET", "/api/v1/tasks/"+sub.Task.ID, aliceToken, nil); res.status != http.StatusOK {
		t.Errorf("reading a task with Redis down: %d %s", res.status, res.body)
	}
	time.Sleep(3 * time.Second)
	redisProxy.Restore()
	final := p.waitStatus(aliceToken, sub.Task.ID, 3*time.Minute, "SUCCESS", "FAILED")
	if final.Status != "SUCCESS" {
		t.Fatalf("after Redis came back: %+v", final)
	}
}

// Tasks submitted while Redis is away are enqueued by the process that took them as soon as
// Redis answers again, with no cleanup round: this process runs no scheduler, so nothing else
// would ever hand them over. Each runs once.
func TestTasksSubmittedDuringARedisOutageAreEnqueuedWhenItAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.seedCustomers(50)
	p, redisProxy := e.startThenCutRedis("api,worker")

	var ids []string
	for range 3 {
		ids = append(ids, p.submitExport(aliceToken, map[string]any{"type": "customers"}).ID)
	}
	if n := e.count("SELECT count(*) FROM tasks WHERE status = 'PENDING' AND enqueued_at IS NULL"); n != 3 {
		t.Fatalf("%d tasks flagged as not enqueued during the outage, want 3", n)
	}
	redisProxy.Restore()
	for _, id := range ids {
		final := p.waitStatus(aliceToken, id, time.Minute, "SUCCESS", "FAILED")
		if final.Status != "SUCCESS" {
			t.Fatalf("task %s after Redis came back: %+v", id, final)
		}
	}
	if n := e.count("SELECT count(*) FROM task_runs"); n != 3 {
		t.Fatalf("%d attempts for 3 tasks, want one each", n)
	}
}

// takenOverThenEnded says whether the task's attempts are the killed one superseded, then the
// takeover, and then only retries after a temporary database error until the last attempt
// ended in status. Under load the takeover's own attempt can end on such an error (a progress
// write waiting past the lock timeout, a third of these tests' 1 s takeover window) and be
// retried.
func (task taskJSON) takenOverThenEnded(status string) bool {
	a := task.Attempts
	if len(a) < 2 || a[0].Status != "SUPERSEDED" || a[1].Trigger != "takeover" || a[len(a)-1].Status != status {
		return false
	}
	for i := 2; i < len(a); i++ {
		if a[i].Trigger != "retry" || a[i-1].Status != "RETRY_WAIT" || !strings.Contains(a[i-1].Error, "temporary database error") {
			return false
		}
	}
	return true
}
