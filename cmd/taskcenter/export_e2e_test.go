package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// readSheet opens a downloaded .xlsx and returns the rows of its first sheet.
func readSheet(t *testing.T, body []byte) [][]string {
	t.Helper()
	return readSheetAt(t, body, 0)
}

// readReport reads the rejected rows of an error report: its last sheet, after the summary
// by field.
func readReport(t *testing.T, body []byte) [][]string {
	t.Helper()
	return readSheetAt(t, body, -1)
}

// readSheetAt reads sheet i of a workbook (negative: counted from the end).
func readSheetAt(t *testing.T, body []byte, i int) [][]string {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("download is not a valid .xlsx: %v", err)
	}
	defer f.Close()
	sheets := f.GetSheetList()
	if i < 0 {
		i += len(sheets)
	}
	rows, err := f.GetRows(sheets[i])
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestExportCustomersEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"TASKCENTER_EXPORT_PAGE_SIZE": "100"})
	e.seedCustomers(2500,
		[3]string{"F1", "=HYPERLINK(\"http://evil\",\"x\")", "13800000001"},
		[3]string{"F2", "+1+1", "13800000002"},
		[3]string{"F3", "@SUM(A1)", "13800000003"},
		[3]string{"F4", "-2+3", "13800000004"},
	)
	const want = 2504
	p := e.start("all")

	began := time.Now()
	task := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	t.Logf("submit answered in %s", time.Since(began))
	if task.Status != "PENDING" || !strings.HasPrefix(task.ID, "tsk_") {
		t.Fatalf("submitted task = %+v", task)
	}
	if n := e.count("SELECT count(*) FROM tasks WHERE task_no = ?", task.ID); n != 1 {
		t.Fatalf("task row exists %d times right after submit", n)
	}

	// Progress never goes down, and ends at 100 with SUCCESS.
	var percents []int
	var currents []int64
	final := task
	testenv.Eventually(t, 60*time.Second, "export to finish", func() bool {
		final = p.task(aliceToken, task.ID)
		percents = append(percents, final.Progress.Percent)
		currents = append(currents, final.Progress.Current)
		return final.Status == "SUCCESS" || final.Status == "FAILED"
	})
	for i := 1; i < len(percents); i++ {
		if percents[i] < percents[i-1] || currents[i] < currents[i-1] {
			t.Fatalf("progress went down: percents %v currents %v", percents, currents)
		}
	}
	if final.Status != "SUCCESS" || final.Progress.Percent != 100 || final.Result == nil || final.Result.Rows != want {
		t.Fatalf("final = %+v", final)
	}

	res := p.do("GET", final.Links["result"], aliceToken, nil)
	if res.status != http.StatusOK || !strings.Contains(res.header.Get("Content-Disposition"), ".xlsx") {
		t.Fatalf("download: %d %v", res.status, res.header)
	}
	rows := readSheet(t, res.body)
	if len(rows) != want+1 || rows[0][0] != "code" || rows[1][0] != "C000001" || rows[2500][0] != "C002500" {
		t.Fatalf("sheet has %d rows (want header + %d); first %v", len(rows), want, rows[:2])
	}
	neutral := map[string]string{"F1": "'=HYPERLINK(\"http://evil\",\"x\")", "F2": "'+1+1", "F3": "'@SUM(A1)", "F4": "'-2+3"}
	for _, r := range rows[2501:] {
		if neutral[r[0]] != r[1] {
			t.Errorf("row %s: name cell %q, want neutralised %q", r[0], r[1], neutral[r[0]])
		}
	}

	// Once the result expires, the download answers 410 and the record stays.
	e.exec("UPDATE tasks SET result_expires_at = now() - interval '1 second' WHERE task_no = ?", task.ID)
	if res := p.do("GET", "/api/v1/tasks/"+task.ID+"/result", aliceToken, nil); res.status != http.StatusGone {
		t.Fatalf("expired download: %d %s", res.status, res.body)
	}
	if got := p.task(aliceToken, task.ID); got.Status != "SUCCESS" || !got.Result.Expired || got.Links["result"] != "" {
		t.Fatalf("expired task view = %+v", got)
	}
}

func TestExportRetriesATransientFaultThenSucceeds(t *testing.T) {
	t.Parallel()
	e, p, task := exportingCustomers(t, 20000)

	// Kill the export's database connection mid-export.
	killed := e.count(`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = ? AND xact_start IS NOT NULL AND pid <> pg_backend_pid() AND query ILIKE '%customers%') k`, e.pg.Schema)
	if killed == 0 {
		t.Fatal("found no export connection to kill")
	}

	final := p.waitStatus(aliceToken, task.ID, 3*time.Minute, "SUCCESS", "FAILED")
	if final.Status != "SUCCESS" || final.Retry != 1 || len(final.Attempts) != 2 {
		t.Fatalf("after one fault: status %s retry_count %d attempts %+v", final.Status, final.Retry, final.Attempts)
	}
	if a := final.Attempts[0]; a.Status != "RETRY_WAIT" || strings.Contains(strings.ToLower(a.Error), "select") {
		t.Fatalf("first attempt = %+v, want RETRY_WAIT with a user-readable error", a)
	}
	if final.Attempts[1].Trigger != "retry" || final.Attempts[1].Status != "SUCCESS" || final.Result.Rows != 20000 {
		t.Fatalf("second attempt = %+v, result %+v", final.Attempts[1], final.Result)
	}
}

func TestExportFailingEveryAttemptFailsOnceWithOneAlert(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		webhooks []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		webhooks = append(webhooks, string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	e := newEnv(t, map[string]string{"TASKCENTER_TYPES_EXPORT_CUSTOMERS_MAX_RETRY": "2", "TASKCENTER_ALERTS_WEBHOOK_URL": hook.URL})
	e.exec("ALTER TABLE customers RENAME TO customers_gone")
	p := e.start("all")
	task := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	final := p.waitStatus(aliceToken, task.ID, 3*time.Minute, "FAILED", "SUCCESS")
	if final.Status != "FAILED" || final.Retry != 2 || len(final.Attempts) != 3 || final.Error == nil || final.Error.Code != "retries_exhausted" {
		t.Fatalf("final = %+v", final)
	}
	if strings.Contains(final.Error.Message, "relation") || strings.Contains(final.Error.Message, "customers_gone") {
		t.Fatalf("error message leaks SQL: %q", final.Error.Message)
	}
	// Give asynq a moment to archive the job, then count alerts: exactly one.
	testenv.Eventually(t, 10*time.Second, "the job to be archived", func() bool {
		info, err := e.inspector().GetQueueInfo("exports.resume")
		return err == nil && info.Archived == 1
	})
	if alerts := p.logs.matching("ALERT", task.ID); len(alerts) != 1 {
		t.Fatalf("alerts for %s = %d, want exactly 1:\n%s", task.ID, len(alerts), strings.Join(alerts, "\n"))
	}
	testenv.Eventually(t, 10*time.Second, "the alert webhook", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(webhooks) > 0
	})
	p.stop() // flushes the webhook sender
	mu.Lock()
	defer mu.Unlock()
	if len(webhooks) != 1 || !strings.Contains(webhooks[0], `"kind":"task_failed"`) || !strings.Contains(webhooks[0], task.ID) {
		t.Fatalf("webhook calls = %q, want one task_failed for %s", webhooks, task.ID)
	}
}

func TestCancelPendingTaskNeverRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.seedCustomers(10)
	api := e.start("api") // no workers yet: the task stays PENDING
	task := api.submitExport(aliceToken, map[string]any{"type": "customers"})
	res := api.do("POST", "/api/v1/tasks/"+task.ID+"/cancel", aliceToken, nil)
	var got taskJSON
	res.json(t, &got)
	if res.status != http.StatusOK || got.Status != "CANCELLED" {
		t.Fatalf("cancel pending: %d %+v", res.status, got)
	}
	if _, err := e.inspector().GetTaskInfo("exports", task.ID+"-a0"); err == nil {
		t.Fatal("the cancelled task's job is still queued")
	}
	// Even if its job is delivered anyway (say the withdraw was lost), it does nothing.
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: e.redis.Addr, DB: e.redis.DB})
	defer client.Close()
	var id int64
	if err := e.db().NewRaw("SELECT id FROM tasks WHERE task_no = ?", task.ID).Scan(context.Background(), &id); err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"task_id":` + strconv.FormatInt(id, 10) + `,"task_no":"` + task.ID + `","attempt":0}`)
	if _, err := client.Enqueue(asynq.NewTask("export:customers", payload), asynq.Queue("exports")); err != nil {
		t.Fatal(err)
	}
	e.start("worker")
	testenv.Eventually(t, 20*time.Second, "the stray job to be processed", func() bool {
		info, err := e.inspector().GetQueueInfo("exports")
		return err == nil && info.Processed >= 1 && info.Pending == 0 && info.Active == 0
	})
	if runs := e.runs(task.ID); len(runs) != 0 {
		t.Fatalf("cancelled task ran: %+v", runs)
	}
	if got := api.task(aliceToken, task.ID); got.Status != "CANCELLED" || got.Attempt != 0 {
		t.Fatalf("after stray delivery: %+v", got)
	}
	if res := api.do("POST", "/api/v1/tasks/"+task.ID+"/cancel", aliceToken, nil); res.status != http.StatusConflict {
		t.Fatalf("cancel of a cancelled task: %d, want 409", res.status)
	}
}

func TestCancelRunningStopsAtNextPageAndIsNotRetried(t *testing.T) {
	t.Parallel()
	e, p, task := exportingCustomers(t, 30000)
	res := p.do("POST", "/api/v1/tasks/"+task.ID+"/cancel", aliceToken, nil)
	var got taskJSON
	res.json(t, &got)
	if res.status != http.StatusOK || got.Status != "RUNNING" || !got.Cancel {
		t.Fatalf("cancel running: %d %+v", res.status, got)
	}
	final := p.waitStatus(aliceToken, task.ID, 30*time.Second, "CANCELLED", "SUCCESS")
	if final.Status != "CANCELLED" || final.Progress.Current >= 30000 || final.Result != nil {
		t.Fatalf("final = %+v, want cancelled before the end", final)
	}
	testenv.Eventually(t, 10*time.Second, "the job to leave the queue", func() bool {
		info, err := e.inspector().GetQueueInfo("exports")
		return err == nil && info.Active == 0 && info.Pending == 0
	})
	info, err := e.inspector().GetQueueInfo("exports")
	if err != nil || info.Retry != 0 || info.Archived != 0 || info.Scheduled != 0 {
		t.Fatalf("asynq holds the cancelled job for another go: %+v %v", info, err)
	}
	if runs := e.runs(task.ID); len(runs) != 1 || runs[0].Status != "CANCELLED" {
		t.Fatalf("runs = %+v", runs)
	}
	if n := e.count("SELECT count(*) FROM tasks WHERE result IS NOT NULL"); n != 0 {
		t.Fatalf("a cancelled export left a result")
	}
}

func TestRetryStartsANewAttemptAndKeepsTheOldOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"TASKCENTER_TYPES_EXPORT_CUSTOMERS_MAX_RETRY": "0"})
	e.exec("ALTER TABLE customers RENAME TO customers_gone")
	e.seedCustomersIn("customers_gone", 5)
	p := e.start("all")
	task := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	failed := p.waitStatus(aliceToken, task.ID, 30*time.Second, "FAILED")
	if failed.Links["retry"] == "" {
		t.Fatalf("a failed task offers no retry link: %+v", failed.Links)
	}

	e.exec("ALTER TABLE customers_gone RENAME TO customers")
	res := p.do("POST", "/api/v1/tasks/"+task.ID+"/retry", aliceToken, nil)
	if res.status != http.StatusAccepted {
		t.Fatalf("retry failed task: %d %s", res.status, res.body)
	}
	done := p.waitStatus(aliceToken, task.ID, 30*time.Second, "SUCCESS", "FAILED")
	if done.Status != "SUCCESS" || len(done.Attempts) != 2 || done.Attempts[0].Status != "FAILED" || done.Attempts[1].Trigger != "manual_retry" {
		t.Fatalf("after retry: %+v", done)
	}
	if res := p.do("POST", "/api/v1/tasks/"+task.ID+"/retry", aliceToken, nil); res.status != http.StatusConflict {
		t.Fatalf("retry of a successful task: %d, want 409", res.status)
	}

	// A cancelled task can be retried too.
	cancelled := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	p.do("POST", "/api/v1/tasks/"+cancelled.ID+"/cancel", aliceToken, nil)
	// (An export that finished before the cancel reached it ends SUCCESS: nothing to retry.)
	if ended := p.waitStatus(aliceToken, cancelled.ID, 30*time.Second, "CANCELLED", "SUCCESS"); ended.Status == "CANCELLED" {
		if res := p.do("POST", "/api/v1/tasks/"+cancelled.ID+"/retry", aliceToken, nil); res.status != http.StatusAccepted {
			t.Fatalf("retry cancelled: %d %s", res.status, res.body)
		}
	}
	p.waitStatus(aliceToken, cancelled.ID, 30*time.Second, "SUCCESS")
}

func (e *env) seedCustomersIn(table string, n int) {
	e.t.Helper()
	e.exec(`INSERT INTO `+table+` (code, name, phone) SELECT 'C' || g, 'n', '13800000000' FROM generate_series(1, ?) g`, n)
}
