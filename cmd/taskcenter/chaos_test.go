package main

// The fault-injection suite (`make chaos`): real worker processes are SIGKILLed and
// SIGTERMed mid-import and mid-export, Redis is flushed and killed, Postgres is restarted,
// and two workers die in turn under a backlog of mixed tasks. Each fault is a row of a
// table — tasks affected, recovered, rows lost, rows duplicated, recovery time — printed
// with t.Log and, with TASKCENTER_CHAOS_WRITE_DOC=1, written into docs/reliability.md.
//
// It is a normal test that skips unless TASKCENTER_CHAOS=1, rather than a file behind a
// build tag: it leans on the end-to-end harness (harness_test.go), so it must compile with
// every `go vet` / `go test` run, or a harness change would break it unnoticed until the next
// `make chaos`. Skipped, it costs nothing; CI can turn it on with one variable.
//
// The scenarios run one after another, not in parallel: they measure recovery times, and
// on a two-core machine parallel scenarios would measure each other.

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// The runtime settings every scenario runs with, recorded in the table so a reader can check
// "recovery ≤ takeover_after + one cleanup interval".
const (
	chaosTakeover  = 2 * time.Second        // worker.takeover_after
	chaosCleanup   = time.Second            // cleanup.spec "@every 1s"
	chaosHeartbeat = 250 * time.Millisecond // worker.heartbeat_interval
	// chaosMargin is what the assertion allows beyond the bound on this noisy, shared
	// two-core machine: the delivery through asynq, the claim, process start-up jitter.
	chaosMargin = time.Second

	chaosImportRows  = 30000 // rows of the import the kill scenarios interrupt
	chaosExportRows  = 30000 // customers the kill scenarios export
	chaosImportBatch = 500   // import.batch_size
	chaosExportPage  = 100   // export.page_size
)

func chaosBound() time.Duration { return chaosTakeover + chaosCleanup }

// newChaosEnv is newEnv with the suite's settings, on the given Postgres and Redis (the
// shared servers when nil, private ones for the scenarios that restart or wipe them).
func newChaosEnv(t *testing.T, pg *storetest.Postgres, rd *testenv.Redis, overrides map[string]string) *env {
	t.Helper()
	if pg == nil {
		pg = storetest.NewPostgres(t)
	}
	if rd == nil {
		rd = testenv.NewRedis(t)
	}
	return newEnvOn(t, pg, rd, map[string]string{
		"TASKCENTER_CONFIG":                    cmp.Or(os.Getenv("TASKCENTER_CHAOS_CONFIG"), "../../configs/taskcenter.yaml"),
		"TASKCENTER_LOG_LEVEL":                 "info",
		"TASKCENTER_WORKER_HEARTBEAT_INTERVAL": chaosHeartbeat.String(),
		"TASKCENTER_WORKER_TAKEOVER_AFTER":     chaosTakeover.String(),
		"TASKCENTER_WORKER_PROGRESS_INTERVAL":  "100ms",
		"TASKCENTER_WORKER_SHUTDOWN_TIMEOUT":   "10s",
		"TASKCENTER_CLEANUP_SPEC":              "@every " + chaosCleanup.String(),
		"TASKCENTER_CLEANUP_ORPHAN_GRACE":      chaosCleanup.String(),
		"TASKCENTER_IMPORT_BATCH_SIZE":         fmt.Sprint(chaosImportBatch),
		"TASKCENTER_EXPORT_PAGE_SIZE":          fmt.Sprint(chaosExportPage),
		// Transient faults (Postgres restarting) retry quickly so runs stay short.
		"TASKCENTER_TYPES_EXPORT_CUSTOMERS_RETRY_BASE": "200ms",
		"TASKCENTER_TYPES_EXPORT_TASKS_RETRY_BASE":     "200ms",
		"TASKCENTER_TYPES_IMPORT_CUSTOMERS_RETRY_BASE": "200ms",
	}, overrides)
}

// workerID is the id a binary worker records in tasks.worker (run.go: host-pid).
func workerID(p *binProc) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, p.cmd.Process.Pid)
}

// runningOn returns which of the test's workers the task runs on.
func runningOn(t *testing.T, workers []*binProc, task chaosTask) *binProc {
	t.Helper()
	for _, w := range workers {
		if workerID(w) == task.Worker {
			return w
		}
	}
	t.Fatalf("the task runs on %q, which is none of the test's workers", task.Worker)
	return nil
}

// --- reading the truth from Postgres --------------------------------------------------------

// chaosTask is a task row as the suite reads it.
type chaosTask struct {
	ID           int64           `bun:"id"`
	TaskNo       string          `bun:"task_no"`
	Type         string          `bun:"type"`
	Queue        string          `bun:"queue"`
	Status       string          `bun:"status"`
	Attempt      int             `bun:"attempt"`
	RetryCount   int             `bun:"retry_count"`
	Worker       string          `bun:"worker"`
	HeartbeatAt  *time.Time      `bun:"heartbeat_at"`
	Current      int64           `bun:"progress_current"`
	Total        int64           `bun:"progress_total"`
	TotalCount   int64           `bun:"total_count"`
	SuccessCount int64           `bun:"success_count"`
	FailedCount  int64           `bun:"failed_count"`
	Result       json.RawMessage `bun:"result"`
	FinishedAt   *time.Time      `bun:"finished_at"`
}

func (c chaosTask) terminal() bool {
	switch c.Status {
	case "SUCCESS", "PARTIAL_SUCCESS", "FAILED", "TIMEOUT", "CANCELLED":
		return true
	}
	return false
}

const chaosTaskColumns = `id, task_no, type, queue, status, attempt, retry_count, COALESCE(worker, '') AS worker, heartbeat_at,
	progress_current, progress_total, total_count, success_count, failed_count, result, finished_at`

// tasksNow reads the tasks (all of them when nos is empty). Errors are returned, not fatal:
// Postgres may be restarting.
func (e *env) tasksNow(nos ...string) ([]chaosTask, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []chaosTask
	var err error
	if len(nos) == 0 {
		err = e.pg.DB.NewRaw("SELECT "+chaosTaskColumns+" FROM tasks ORDER BY id").Scan(ctx, &out)
	} else {
		err = e.pg.DB.NewRaw("SELECT "+chaosTaskColumns+" FROM tasks WHERE task_no = ANY(?::text[]) ORDER BY id", pgTextArray(nos)).Scan(ctx, &out)
	}
	return out, err
}

func pgTextArray(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = `"` + strings.ReplaceAll(v, `"`, `\"`) + `"`
	}
	return "{" + strings.Join(q, ",") + "}"
}

// mustTasks reads the tasks, retrying through a Postgres restart for up to a minute.
func (e *env) mustTasks(nos ...string) []chaosTask {
	e.t.Helper()
	return throughRestart(e.t, "read tasks", func() ([]chaosTask, error) { return e.tasksNow(nos...) })
}

// throughRestart retries read until it succeeds, for up to a minute (Postgres may be
// restarting), and after that fails the test, saying what it was reading.
func throughRestart[T any](t *testing.T, what string, read func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := read()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) mustTask(no string) chaosTask {
	e.t.Helper()
	tasks := e.mustTasks(no)
	if len(tasks) != 1 {
		e.t.Fatalf("task %s not found", no)
	}
	return tasks[0]
}

// mustRuns reads the task's attempts (the columns the suite reads), retrying through a
// Postgres restart for up to a minute.
func (e *env) mustRuns(taskID int64) []store.Run {
	e.t.Helper()
	return throughRestart(e.t, "read runs", func() ([]store.Run, error) {
		var runs []store.Run
		err := e.pg.DB.NewRaw("SELECT attempt, trigger, worker, status, started_at, finished_at FROM task_runs WHERE task_id = ? ORDER BY attempt", taskID).
			Scan(context.Background(), &runs)
		return runs, err
	})
}

func describeRuns(runs []store.Run) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("%s→%s", r.Trigger, r.Status)
	}
	return strings.Join(parts, ", ")
}

// waitChaos polls cond (which may fail while a server restarts) until it holds.
func waitChaos(t *testing.T, within time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var lastErr error
	for {
		ok, err := cond()
		if ok && err == nil {
			return
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", within, what, lastErr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRunningPast waits until the task is RUNNING with at least the fraction at of its rows
// done, and returns it as it was then. A task that ends first fails the test: the fault meant
// for the middle of its run would come too late.
func (e *env) waitRunningPast(kind, no string, at float64) chaosTask {
	e.t.Helper()
	var now chaosTask
	waitChaos(e.t, 60*time.Second, fmt.Sprintf("the %s to reach %.0f%%", kind, at*100), func() (bool, error) {
		tasks, err := e.tasksNow(no)
		if err != nil || len(tasks) == 0 {
			return false, err
		}
		now = tasks[0]
		if now.terminal() {
			e.t.Fatalf("the %s finished before the fault: %+v", kind, now)
		}
		return now.Status == "RUNNING" && now.Total > 0 && float64(now.Current) >= at*float64(now.Total), nil
	})
	return now
}

// waitTerminal waits until every task has ended and returns them.
func (e *env) waitTerminal(within time.Duration, nos ...string) []chaosTask {
	e.t.Helper()
	var tasks []chaosTask
	deadline := time.Now().Add(within)
	for {
		var err error
		tasks, err = e.tasksNow(nos...)
		if err == nil && len(tasks) == len(nos) {
			open := 0
			for _, tk := range tasks {
				if !tk.terminal() {
					open++
				}
			}
			if open == 0 {
				return tasks
			}
			if time.Now().After(deadline) {
				var stuck []string
				for _, tk := range tasks {
					if !tk.terminal() && len(stuck) < 10 {
						stuck = append(stuck, fmt.Sprintf("%s %s attempt %d on %q at %d/%d", tk.TaskNo, tk.Status, tk.Attempt, tk.Worker, tk.Current, tk.Total))
					}
				}
				e.t.Fatalf("%d of %d tasks still not finished after %s: %s", open, len(nos), within, strings.Join(stuck, "; "))
			}
		} else if time.Now().After(deadline) {
			e.t.Fatalf("tasks not readable after %s: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkFiles fails the row for files tasks point at that are missing, and for anything
// left in the temp area (a takeover deletes the dead attempt's temp files). A result file
// no task points at is the output of an attempt killed after moving its file into place and
// before recording it; the cleanup's orphan-results step deletes those once they are older
// than cleanup.temp_ttl (6 h), so they are noted in the details, not failed.
func (e *env) checkFiles(row *chaosRow) {
	e.t.Helper()
	var refs []string
	if err := e.pg.DB.NewRaw(`SELECT f FROM (SELECT result ->> 'file' AS f FROM tasks UNION ALL SELECT result ->> 'error_report' FROM tasks) x WHERE f IS NOT NULL`).
		Scan(context.Background(), &refs); err != nil {
		e.t.Fatalf("read result files: %v", err)
	}
	want := map[string]bool{}
	for _, r := range refs {
		want[filepath.ToSlash(r)] = true
	}
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "results"))
	var stray []string
	for _, d := range entries {
		rel := "results/" + d.Name()
		if !want[rel] {
			stray = append(stray, rel)
		}
		delete(want, rel)
	}
	if len(stray) > 0 {
		row.detail += fmt.Sprintf("; %d result file(s) of killed attempts not recorded, left for the orphan-results sweep: %v", len(stray), stray)
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for rel := range want {
			missing = append(missing, rel)
		}
		row.fail("result files tasks point at are missing: %v", missing)
	}
	if left := e.tempLeft(); len(left) > 0 {
		row.fail("temp files left behind: %v", left)
	}
}

// tempLeft lists what is left in the data dir's temp area.
func (e *env) tempLeft() []string {
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "tmp"))
	var out []string
	for _, d := range entries {
		out = append(out, d.Name())
	}
	return out
}

// --- what each task must have produced -------------------------------------------------------

// outcome is how one task ended, checked against what it had to produce.
type outcome struct {
	exact  bool // ended SUCCESS/PARTIAL_SUCCESS with exactly the expected counts and rows
	lost   int  // rows that should be there and are not
	dup    int  // rows written, rejected or delivered more than once
	detail string
}

// importFile is a generated import and what it must produce.
type importFile struct {
	name     string
	content  []byte
	prefix   string
	rows     int
	valid    map[string]int // code → the row that must have written it
	rejected map[int]bool   // rows that must be rejected
}

// genImport builds an .xlsx of rows data rows with codes prefix+row. Every 97th row has a bad
// phone; every 101st repeats the code of the row above (rejected when that row was imported).
func genImport(t *testing.T, prefix string, rows int) importFile {
	t.Helper()
	f := importFile{name: prefix + ".xlsx", prefix: prefix, rows: rows, valid: map[string]int{}, rejected: map[int]bool{}}
	f.content = sheetBytes(t, func(x *excelize.File) {
		sw, _ := x.NewStreamWriter("Sheet1")
		sw.SetRow("A1", []any{"code", "name", "phone", "email", "city"}) //nolint:errcheck
		for i := 2; i <= rows+1; i++ {
			code, phone := fmt.Sprintf("%s%06d", prefix, i), fmt.Sprintf("139%08d", i)
			if i%97 == 0 {
				phone = "12345"
			}
			if i%101 == 0 {
				code = fmt.Sprintf("%s%06d", prefix, i-1)
			}
			switch _, taken := f.valid[code]; {
			case i%97 == 0, taken:
				f.rejected[i] = true
			default:
				f.valid[code] = i
			}
			cell, _ := excelize.CoordinatesToCellName(1, i)
			sw.SetRow(cell, []any{code, fmt.Sprintf("name %d", i), phone, fmt.Sprintf("%s%d@example.com", strings.ToLower(prefix), i), "Beijing"}) //nolint:errcheck
		}
		sw.Flush() //nolint:errcheck
	})
	return f
}

// checkImport compares the customers and rejected rows an import left with its file.
func (e *env) checkImport(tk chaosTask, f importFile) outcome {
	e.t.Helper()
	var custs []struct {
		Code string         `bun:"code"`
		Task sql.NullInt64  `bun:"last_import_task_id"`
		Row  sql.NullInt64  `bun:"last_import_row"`
		Name sql.NullString `bun:"name"`
	}
	if err := e.pg.DB.NewRaw("SELECT code, last_import_task_id, last_import_row, name FROM customers WHERE code LIKE ?", f.prefix+"%").
		Scan(context.Background(), &custs); err != nil {
		e.t.Fatalf("read customers: %v", err)
	}
	var items []struct {
		Row int `bun:"row_no"`
		N   int `bun:"n"`
	}
	if err := e.pg.DB.NewRaw("SELECT row_no, count(*) AS n FROM task_items WHERE task_id = ? GROUP BY row_no", tk.ID).
		Scan(context.Background(), &items); err != nil {
		e.t.Fatalf("read rejected rows: %v", err)
	}
	var o outcome
	written := map[string]int{}
	for _, c := range custs {
		if c.Task.Int64 == tk.ID {
			written[c.Code] = int(c.Row.Int64)
		}
	}
	for code, row := range f.valid {
		if written[code] != row {
			o.lost++
		}
	}
	if len(custs) > len(f.valid) {
		o.dup += len(custs) - len(f.valid)
	}
	seen := map[int]bool{}
	for _, it := range items {
		seen[it.Row] = true
		o.dup += it.N - 1
		if !f.rejected[it.Row] {
			o.dup++ // an imported row also rejected: it went through twice
		}
	}
	for row := range f.rejected {
		if !seen[row] {
			o.lost++
		}
	}
	wantOK, wantBad := int64(len(f.valid)), int64(len(f.rejected))
	o.dup += int(max(0, tk.SuccessCount-wantOK) + max(0, tk.FailedCount-wantBad))
	want := "SUCCESS"
	if wantBad > 0 {
		want = "PARTIAL_SUCCESS"
	}
	o.exact = tk.Status == want && tk.TotalCount == int64(f.rows) && tk.SuccessCount == wantOK && tk.FailedCount == wantBad && o.lost == 0 && o.dup == 0
	o.detail = fmt.Sprintf("%s %d/%d/%d (want %d/%d/%d)", tk.Status, tk.TotalCount, tk.SuccessCount, tk.FailedCount, f.rows, wantOK, wantBad)
	return o
}

// checkExport reads an export's result file and compares its rows with customers
// C000001…C<n>.
func (e *env) checkExport(tk chaosTask, n int) outcome {
	e.t.Helper()
	var res struct {
		File string `json:"file"`
		Rows int64  `json:"rows"`
	}
	json.Unmarshal(tk.Result, &res) //nolint:errcheck // checked below
	if tk.Status != "SUCCESS" || res.File == "" {
		return outcome{lost: n, detail: fmt.Sprintf("%s without a result file", tk.Status)}
	}
	f, err := excelize.OpenFile(filepath.Join(e.dataDir, res.File))
	if err != nil {
		return outcome{lost: n, detail: fmt.Sprintf("result file unreadable: %v", err)}
	}
	defer f.Close()
	rows, err := f.Rows(f.GetSheetList()[0])
	if err != nil {
		return outcome{lost: n, detail: fmt.Sprintf("result sheet unreadable: %v", err)}
	}
	defer rows.Close()
	seen := make(map[string]bool, n)
	var o outcome
	lines := 0
	for rows.Next() {
		cols, err := rows.Columns()
		if err != nil {
			return outcome{lost: n, detail: fmt.Sprintf("result sheet unreadable: %v", err)}
		}
		if lines++; lines == 1 || len(cols) == 0 {
			continue // header
		}
		code := cols[0]
		var num int
		if _, err := fmt.Sscanf(code, "C%06d", &num); err != nil || num < 1 || num > n || len(code) != 7 || seen[code] {
			o.dup++
			continue
		}
		seen[code] = true
	}
	o.lost = n - len(seen)
	o.exact = o.lost == 0 && o.dup == 0 && res.Rows == int64(n)
	o.detail = fmt.Sprintf("%s, %d rows in the sheet (want %d)", tk.Status, lines-1, n)
	return o
}

// --- the table ---------------------------------------------------------------------------------

// chaosRow is one fault's line of the table.
type chaosRow struct {
	fault     string
	affected  int
	recovered int
	lost, dup int
	recovery  string // fault → the work resumed, with what "resumed" means for this fault
	finished  string // fault → every affected task finished
	detail    string
	failures  []string // acceptance violations; empty = the row passes
}

func (r *chaosRow) fail(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// recordOne fills a row whose fault affected one task from that task's outcome: the rows it
// lost and duplicated, and whether it recovered exactly.
func (r *chaosRow) recordOne(o outcome) {
	r.lost, r.dup = o.lost, o.dup
	if o.exact {
		r.recovered = 1
	} else {
		r.fail("not recovered exactly: %s", o.detail)
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// spread formats a set of durations: one value, or max with median and count.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 1 {
		return secs(s[0])
	}
	return fmt.Sprintf("max %s (median %s, n=%d)", secs(s[len(s)-1]), secs(s[len(s)/2]), len(s))
}

// maxOrDash is the largest of ds, or "—" when there is none.
func maxOrDash(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return secs(m)
}

// chaosSettings is the line above the main table: the settings its bound follows from.
func chaosSettings() string {
	return fmt.Sprintf("Settings: `worker.takeover_after` = %s, cleanup `@every %s` (`cleanup.orphan_grace` %s), `worker.heartbeat_interval` = %s, "+
		"import batch %d rows, export page %d rows. Bound for recovery after SIGKILL: takeover_after + one cleanup interval = **%s** "+
		"(asserted with a %s margin for this shared machine).",
		chaosTakeover, chaosCleanup, chaosCleanup, chaosHeartbeat, chaosImportBatch, chaosExportPage, secs(chaosBound()), secs(chaosMargin))
}

// markdown renders the rows as a table docs/reliability.md keeps, under the run's line and
// the table's settings.
func chaosMarkdown(rows []chaosRow, settings string, took time.Duration, loadBefore string) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Run %s on %s (%d CPUs, %s/%s, %s), suite took %s; load average (1 min) %s at the start, %s at the end.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(),
		took.Round(time.Second), loadBefore, loadAverage())
	b.WriteString(settings + "\n\n")
	b.WriteString("| # | fault | tasks affected | recovered | rows lost | rows duplicated | recovery | fault → all finished | result | details |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range rows {
		verdict := "pass"
		if len(r.failures) > 0 {
			verdict = "**FAIL**: " + strings.Join(r.failures, "; ")
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %d | %d | %d | %s | %s | %s | %s |\n", i+1, r.fault, r.affected, r.recovered,
			r.lost, r.dup, r.recovery, r.finished, verdict, strings.ReplaceAll(r.detail, "|", "/"))
	}
	return b.String()
}

// loadAverage is the one-minute load average, or "?" where /proc/loadavg is unreadable: the
// machine's other work, which the recovery times include.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

const docPath = "../../docs/reliability.md"

// docTable is a table section of docs/reliability.md: its markers are "<!-- name:begin … -->"
// and "<!-- name:end -->".
type docTable string

const (
	mainTable     docTable = "chaos-table"          // the process, Redis and Postgres faults
	failoverTable docTable = "chaos-failover-table" // the Redis failovers (chaos_failover_test.go)
)

func (d docTable) begin() string {
	return "<!-- " + string(d) + ":begin (written by `make chaos`; do not edit by hand) -->"
}
func (d docTable) end() string { return "<!-- " + string(d) + ":end -->" }

// writeDoc replaces a table section of docs/reliability.md.
func writeDoc(section docTable, table string) error {
	b, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	doc := string(b)
	i, j := strings.Index(doc, section.begin()), strings.Index(doc, section.end())
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q … %q section", docPath, section.begin(), section.end())
	}
	doc = doc[:i+len(section.begin())] + "\n" + table + doc[j:]
	return os.WriteFile(docPath, []byte(doc), 0o644)
}

// --- the suite -----------------------------------------------------------------------------------

// failRow fails the scenario's subtest with the row's violations (which also prints the
// logs of its processes, see env.start and env.startBinary).
func failRow(t *testing.T, r *chaosRow) {
	for _, f := range r.failures {
		if f != "scenario did not complete (see the test log)" {
			t.Errorf("%s: %s", r.fault, f)
		}
	}
}

type chaosScenario struct {
	name  string
	run   func(t *testing.T, row *chaosRow)
	table docTable // where its rows are written
}

func TestChaos(t *testing.T) {
	if os.Getenv("TASKCENTER_CHAOS") != "1" {
		t.Skip("fault-injection suite; run it with TASKCENTER_CHAOS=1 (make chaos)")
	}
	scenarios := []chaosScenario{
		{"sigkill_export_10", func(t *testing.T, r *chaosRow) { killMidTask(t, r, "export", 0.10) }, mainTable},
		{"sigkill_export_50", func(t *testing.T, r *chaosRow) { killMidTask(t, r, "export", 0.50) }, mainTable},
		{"sigkill_export_90", func(t *testing.T, r *chaosRow) { killMidTask(t, r, "export", 0.90) }, mainTable},
		{"sigkill_import_10", func(t *testing.T, r *chaosRow) { killMidTask(t, r, "import", 0.10) }, mainTable},
		{"sigkill_import_50", func(t *testing.T, r *chaosRow) { killMidTask(t, r, "import", 0.50) }, mainTable},
		{"sigkill_import_90", func(t *testing.T, r *chaosRow) { killMidTask(t, r, "import", 0.90) }, mainTable},
		{"sigterm_import_50", sigtermMidImport, mainTable},
		{"sigstop_import_50", func(t *testing.T, r *chaosRow) { freezeMidTask(t, r, "import", 0.50) }, mainTable},
		{"sigstop_export_50", func(t *testing.T, r *chaosRow) { freezeMidTask(t, r, "export", 0.50) }, mainTable},
		{"sigstop_scheduler", freezeScheduler, mainTable},
		{"redis_flushall", func(t *testing.T, r *chaosRow) { redisFault(t, r, "flushall") }, mainTable},
		{"redis_restart", func(t *testing.T, r *chaosRow) { redisFault(t, r, "restart") }, mainTable},
		{"postgres_restart_fast", func(t *testing.T, r *chaosRow) { postgresRestart(t, r, "fast") }, mainTable},
		{"postgres_restart_immediate", func(t *testing.T, r *chaosRow) { postgresRestart(t, r, "immediate") }, mainTable},
		{"two_workers_killed_in_turn", nil, mainTable}, // two rows, see twoWorkersKilled
		{"redis_sentinel_master_killed", func(t *testing.T, r *chaosRow) { redisMasterKilled(t, r, sentinelTarget) }, failoverTable},
		{"redis_cluster_master_killed", func(t *testing.T, r *chaosRow) { redisMasterKilled(t, r, clusterTarget) }, failoverTable},
	}
	// The processes read the config file at start. Snapshot it now, so that an edit to the
	// working tree during the run cannot hand the binary built at the start keys it does not
	// know (several people work in one tree).
	cfg, err := os.ReadFile("../../configs/taskcenter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(t.TempDir(), "taskcenter.yaml")
	if err := os.WriteFile(snapshot, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TASKCENTER_CHAOS_CONFIG", snapshot)

	// Each table is written when all its scenarios ran: `make chaos` writes both, and
	// -run 'TestChaos/redis_.*_master_killed' the failover table alone.
	type tableRun struct {
		rows       []chaosRow
		ran, of    int
		took       time.Duration
		loadBefore string
	}
	tables := map[docTable]*tableRun{mainTable: {}, failoverTable: {}}
	for _, sc := range scenarios {
		tables[sc.table].of++
	}
	for _, sc := range scenarios {
		tr := tables[sc.table]
		began := time.Now()
		if tr.ran == 0 {
			tr.loadBefore = loadAverage()
		}
		if sc.run == nil {
			t.Run(sc.name, func(t *testing.T) {
				tr.ran++
				first := chaosRow{fault: "2 workers killed in turn under a backlog: 1st SIGKILL"}
				second := chaosRow{fault: "2 workers killed in turn under a backlog: 2nd SIGKILL"}
				defer func() {
					incomplete := t.Failed() // before failRow marks the test failed
					for _, r := range []*chaosRow{&first, &second} {
						if incomplete && len(r.failures) == 0 {
							r.fail("scenario did not complete (see the test log)")
						}
						failRow(t, r)
						tr.rows = append(tr.rows, *r)
					}
				}()
				twoWorkersKilled(t, &first, &second)
			})
		} else {
			t.Run(sc.name, func(t *testing.T) {
				tr.ran++
				row := chaosRow{fault: sc.name, recovery: "—", finished: "—"}
				defer func() {
					if t.Failed() && len(row.failures) == 0 {
						row.fail("scenario did not complete (see the test log)")
					}
					failRow(t, &row)
					tr.rows = append(tr.rows, row)
				}()
				sc.run(t, &row)
			})
		}
		tr.took += time.Since(began)
	}
	failed, all := 0, 0
	for _, name := range []docTable{mainTable, failoverTable} {
		tr := tables[name]
		if tr.ran == 0 {
			continue
		}
		settings := chaosSettings()
		if name == failoverTable {
			settings = failoverSettings()
		}
		table := chaosMarkdown(tr.rows, settings, tr.took, tr.loadBefore)
		t.Log("\n" + table)
		for _, r := range tr.rows {
			all++
			if len(r.failures) > 0 {
				failed++
			}
		}
		if os.Getenv("TASKCENTER_CHAOS_WRITE_DOC") != "1" {
			continue
		}
		if tr.ran != tr.of {
			t.Logf("not writing the %s section of %s: only %d of its %d scenarios ran (-run filter)", name, docPath, tr.ran, tr.of)
		} else if err := writeDoc(name, table); err != nil {
			t.Errorf("write %s: %v", docPath, err)
		} else {
			t.Logf("wrote the %s section of %s", name, docPath)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d rows failed (see the tables and the scenarios' errors above)", failed, all)
	}
}

// takeover is how a killed attempt's task came back, each time measured from the kill: when
// its heartbeat went stale, when its job was back in asynq (zero when not seen), and when the
// takeover attempt started.
type takeover struct {
	stale   time.Duration // the dead attempt's last heartbeat + takeover_after
	inRedis time.Duration // its job first seen in the resume lane (laneWatch)
	started time.Duration // the takeover attempt started (task_runs.started_at)
	inAt    time.Time
	startAt time.Time
}

// laneWatch notes when asynq first holds the takeover job of each killed attempt: the
// moment the task was really handed back. tasks.enqueued_at does not tell: it is stamped
// when a cleanup round selects the task, before the enqueue, and again by every later round
// while the job waits.
type laneWatch struct {
	insp   *asynq.Inspector
	killed map[string]chaosTask
	seen   map[string]time.Time
}

// newLaneWatch watches for the takeover jobs of the killed attempts until the test ends.
func newLaneWatch(e *env, killed map[string]chaosTask) *laneWatch {
	w := &laneWatch{insp: e.inspector(), killed: killed, seen: map[string]time.Time{}}
	e.t.Cleanup(func() { w.insp.Close() })
	return w
}

// poll looks for the jobs not seen yet.
func (w *laneWatch) poll() {
	for no, tk := range w.killed {
		if _, ok := w.seen[no]; ok {
			continue
		}
		if _, err := w.insp.GetTaskInfo(jobs.Lanes(tk.Queue)[0], jobs.JobID(no, tk.Attempt)); err == nil {
			w.seen[no] = time.Now()
		}
	}
}

// checkTakeover measures the takeover of tk after the kill of its attempt killedAttempt, and
// checks it is a takeover that started within the bound.
func checkTakeover(e *env, row *chaosRow, tk chaosTask, killedAttempt int, killedAt time.Time, lanes *laneWatch) (takeover, bool) {
	runs := e.mustRuns(tk.ID)
	for i, r := range runs {
		if r.Attempt != killedAttempt+1 {
			continue
		}
		to := takeover{started: r.StartedAt.Sub(killedAt), startAt: r.StartedAt}
		if at, ok := lanes.seen[tk.TaskNo]; ok {
			to.inAt, to.inRedis = at, at.Sub(killedAt)
		}
		if tk.HeartbeatAt != nil {
			to.stale = tk.HeartbeatAt.Add(chaosTakeover).Sub(killedAt)
		}
		if r.Trigger != "takeover" {
			row.fail("%s: the attempt after the kill is %q, want a takeover", tk.TaskNo, r.Trigger)
		}
		if i > 0 && runs[i-1].Status != "SUPERSEDED" {
			row.fail("%s: the killed attempt is %s, want SUPERSEDED", tk.TaskNo, runs[i-1].Status)
		}
		if to.started > chaosBound()+chaosMargin {
			row.fail("%s (%s): taken over %s after the kill (heartbeat stale at %s, in the resume lane at %s), over the bound %s + %s margin",
				tk.TaskNo, tk.Type, secs(to.started), secs(to.stale), secs(to.inRedis), secs(chaosBound()), secs(chaosMargin))
		}
		return to, true
	}
	// The killed attempt's own ending may have been on its way at the kill: a statement the
	// process sent before it died still commits. Its transaction began before the kill (the
	// run's finished_at is its now()); anything the dead process wrote would have.
	if n := len(runs); n > 0 && runs[n-1].Attempt == killedAttempt && runs[n-1].Status != "RUNNING" &&
		runs[n-1].FinishedAt != nil && runs[n-1].FinishedAt.Before(killedAt) {
		return takeover{}, false
	}
	row.fail("%s: no attempt after the killed attempt %d (runs: %s)", tk.TaskNo, killedAttempt, describeRuns(runs))
	return takeover{}, false
}

// startedBetween counts the tasks of taskType, among those in queued, whose first attempt
// started between from and to: new work that went ahead of a taken-over task after it was
// re-delivered (the resume lane should make this zero, up to a fetch already in flight).
func (e *env) startedBetween(taskType string, queued map[string]bool, from, to time.Time) int {
	var nos []string
	if err := e.pg.DB.NewRaw(`SELECT t.task_no FROM task_runs r JOIN tasks t ON t.id = r.task_id
		WHERE r.attempt = 1 AND t.type = ? AND r.started_at > ? AND r.started_at < ?`, taskType, from, to).
		Scan(context.Background(), &nos); err != nil {
		e.t.Fatalf("read runs: %v", err)
	}
	n := 0
	for _, no := range nos {
		if queued[no] {
			n++
		}
	}
	return n
}

// medianRun is the median duration of the successful attempts of taskType.
func (e *env) medianRun(taskType string) time.Duration {
	var secs sql.NullFloat64
	e.pg.DB.NewRaw(`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.finished_at - r.started_at))
		FROM task_runs r JOIN tasks t ON t.id = r.task_id WHERE t.type = ? AND r.status IN ('SUCCESS', 'PARTIAL_SUCCESS')`, taskType).
		Scan(context.Background(), &secs) //nolint:errcheck // a diagnostic
	return time.Duration(secs.Float64 * float64(time.Second))
}

// cleanupTrace says when the cleanup rounds around a fault ran, relative to it, and
// how long they took: the part of a takeover's delay that belongs to the cleanup.
func (e *env) cleanupTrace(from time.Time, within time.Duration) string {
	var rounds []struct {
		Started  time.Time       `bun:"started_at"`
		Finished sql.NullTime    `bun:"finished_at"`
		Report   json.RawMessage `bun:"report"`
	}
	// From a little before the fault: a round still running then holds a maintenance slot.
	if err := e.pg.DB.NewRaw("SELECT started_at, finished_at, report FROM cleanup_rounds WHERE started_at >= ? AND started_at < ? ORDER BY started_at",
		from.Add(-3*time.Second), from.Add(within)).Scan(context.Background(), &rounds); err != nil {
		return fmt.Sprintf("cleanup rounds unreadable: %v", err)
	}
	var parts []string
	for _, r := range rounds {
		var rep struct {
			Orphans int                `json:"orphans_enqueued"`
			Took    map[string]float64 `json:"took_ms"`
		}
		json.Unmarshal(r.Report, &rep) //nolint:errcheck // an unfinished round has none
		took := "unfinished"
		if r.Finished.Valid {
			steps := make([]string, 0, len(rep.Took))
			for name := range rep.Took {
				steps = append(steps, name)
			}
			sort.Slice(steps, func(i, j int) bool { return rep.Took[steps[i]] > rep.Took[steps[j]] })
			var slow []string
			for _, name := range steps[:min(2, len(steps))] {
				slow = append(slow, fmt.Sprintf("%s %.2f s", name, rep.Took[name]/1000))
			}
			took = fmt.Sprintf("took %.2f s: %s; %d orphans enqueued", r.Finished.Time.Sub(r.Started).Seconds(), strings.Join(slow, ", "), rep.Orphans)
		}
		parts = append(parts, fmt.Sprintf("%+.2f s (%s)", r.Started.Sub(from).Seconds(), took))
	}
	return "cleanup rounds around the fault (start relative to it): " + strings.Join(parts, ", ")
}

// killMidTask SIGKILLs the worker running one export or import when it is at fraction at, with
// another worker idle and ready, and checks the takeover.
func killMidTask(t *testing.T, row *chaosRow, kind string, at float64) {
	faultMidTask(t, row, kind, at, syscall.SIGKILL, 1)
}

// freezeMidTask is killMidTask with SIGSTOP, as a VM pause or heavy swapping would do it: the
// process keeps its connections, and an import's worker is frozen inside a batch transaction
// that holds the task row locked. The takeover must come within the same bound; the frozen
// process is woken once its task was taken over and must write nothing.
func freezeMidTask(t *testing.T, row *chaosRow, kind string, at float64) {
	faultMidTask(t, row, kind, at, syscall.SIGSTOP, 1)
}

// freezeScheduler freezes one of two schedulers (SIGSTOP) and then SIGKILLs the worker of an
// export: the other scheduler's cleanup rounds must still hand the task over within the bound.
func freezeScheduler(t *testing.T, row *chaosRow) {
	faultMidTask(t, row, "export", 0.3, syscall.SIGKILL, 2)
	row.fault = fmt.Sprintf("SIGSTOP one of two schedulers, then SIGKILL a worker at ~30%% of an export (%d rows)", chaosExportRows)
}

// rowLockedByIdleTransaction reports whether a session of the test's database sits idle in a
// transaction that locked a task row: where a worker frozen mid-batch leaves it.
func (e *env) rowLockedByIdleTransaction() (bool, error) {
	var n int
	err := e.pg.DB.NewRaw(`SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
		WHERE a.state = 'idle in transaction' AND l.relation = 'tasks'::regclass AND l.mode = 'RowShareLock'`).
		Scan(context.Background(), &n)
	return n > 0, err
}

// freezeInBatch SIGSTOPs w until it is caught inside a batch transaction holding the task row
// (a stop between batches is undone with SIGCONT and tried again a moment later).
func (e *env) freezeInBatch(t *testing.T, w *binProc) time.Time {
	for try := range 200 {
		if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		for time.Since(at) < 150*time.Millisecond {
			if held, err := e.rowLockedByIdleTransaction(); err != nil {
				t.Fatal(err)
			} else if held {
				t.Logf("frozen inside a batch on try %d", try+1)
				return at
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(20+try%7*15) * time.Millisecond)
	}
	t.Fatal("could not stop the worker inside a batch transaction in 200 tries")
	return time.Time{}
}

// faultMidTask delivers sig (SIGKILL, or SIGSTOP to freeze) to the worker running one export
// or import when it is at fraction at, with another worker idle and ready, and checks the
// takeover. schedulers is how many api+scheduler processes run; with two, the first is frozen
// before the fault.
func faultMidTask(t *testing.T, row *chaosRow, kind string, at float64, sig syscall.Signal, schedulers int) {
	e := newChaosEnv(t, nil, nil, nil)
	verb := "SIGKILL"
	if sig == syscall.SIGSTOP {
		verb = "SIGSTOP"
	}
	var imp importFile
	if kind == "export" {
		row.fault = fmt.Sprintf("%s worker at ~%.0f%% of an export (%d rows)", verb, at*100, chaosExportRows)
		e.seedCustomers(chaosExportRows)
	} else {
		row.fault = fmt.Sprintf("%s worker at ~%.0f%% of an import (%d rows)", verb, at*100, chaosImportRows)
		imp = genImport(t, "K", chaosImportRows)
	}
	api := e.start("api,scheduler")
	if schedulers > 1 {
		// The binary, so that it can be frozen; the in-process one keeps serving the API.
		sched := e.startBinary("scheduler")
		for range schedulers - 2 {
			e.startBinary("scheduler")
		}
		if err := sched.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer sched.cmd.Process.Signal(syscall.SIGCONT) //nolint:errcheck // killed at cleanup anyway
	}
	workers := []*binProc{e.startBinary("worker"), e.startBinary("worker")}
	var task taskJSON
	if kind == "export" {
		task = api.submitExport(aliceToken, map[string]any{"type": "customers"})
	} else {
		task = api.submitImport(aliceToken, imp.name, imp.content, nil)
	}
	row.affected = 1

	atKill := e.waitRunningPast(kind, task.ID, at)
	doomed := runningOn(t, workers, atKill)
	var killedAt time.Time
	switch {
	case sig == syscall.SIGKILL:
		doomed.signal(syscall.SIGKILL, 10*time.Second)
		killedAt = time.Now()
	case kind == "import":
		killedAt = e.freezeInBatch(t, doomed)
	default:
		if err := doomed.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		killedAt = time.Now()
	}
	atKill = e.mustTask(task.ID) // what the dead attempt had committed
	lanes := newLaneWatch(e, map[string]chaosTask{task.ID: atKill})
	waitChaos(t, 60*time.Second, "the takeover", func() (bool, error) {
		lanes.poll()
		tk, err := e.tasksNow(task.ID)
		return err == nil && len(tk) == 1 && (tk[0].Attempt > atKill.Attempt || tk[0].terminal()), err
	})
	if sig == syscall.SIGSTOP {
		// Wake the frozen worker while the new attempt runs: whatever it still tries to
		// write is fenced, so the result below must be exact all the same.
		if err := doomed.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}

	final := e.waitTerminal(90*time.Second, task.ID)[0]
	var o outcome
	if kind == "export" {
		o = e.checkExport(final, chaosExportRows)
	} else {
		o = e.checkImport(final, imp)
	}
	row.recordOne(o)
	if to, ok := checkTakeover(e, row, atKill, atKill.Attempt, killedAt, lanes); ok {
		fault := "kill"
		if sig == syscall.SIGSTOP {
			fault = "freeze"
		}
		row.recovery = fmt.Sprintf("%s (%s → takeover attempt started; heartbeat stale at %s, in the resume lane at %s)", secs(to.started), fault,
			secs(to.stale), secs(to.inRedis))
	}
	if final.FinishedAt != nil {
		row.finished = secs(final.FinishedAt.Sub(killedAt))
	}
	row.detail = fmt.Sprintf("%s at %d/%d rows committed; attempts: %s; %s", verb, atKill.Current, atKill.Total,
		describeRuns(e.mustRuns(final.ID)), o.detail)
	e.checkFiles(row)
}

// sigtermMidImport stops the worker running an import with SIGTERM at ~50%: the attempt ends
// at a batch boundary, the task is handed back without spending a retry, and the other
// worker resumes it from its checkpoint.
func sigtermMidImport(t *testing.T, row *chaosRow) {
	row.fault = fmt.Sprintf("SIGTERM worker at ~50%% of an import (%d rows)", chaosImportRows)
	e := newChaosEnv(t, nil, nil, nil)
	imp := genImport(t, "T", chaosImportRows)
	api := e.start("api,scheduler")
	workers := []*binProc{e.startBinary("worker"), e.startBinary("worker")}
	task := api.submitImport(aliceToken, imp.name, imp.content, nil)
	row.affected = 1
	atStop := e.waitRunningPast("import", task.ID, 0.5)
	stopping := runningOn(t, workers, atStop)
	sentAt := time.Now()
	if err := stopping.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		row.fail("the worker exited with %v after SIGTERM, want status 0", err)
	}
	exitedIn := time.Since(sentAt)

	final := e.waitTerminal(90*time.Second, task.ID)[0]
	o := e.checkImport(final, imp)
	row.recordOne(o)
	runs := e.mustRuns(final.ID)
	for i, r := range runs {
		if r.Attempt != atStop.Attempt+1 {
			continue
		}
		d := r.StartedAt.Sub(sentAt)
		row.recovery = secs(d) + " (SIGTERM → resumed attempt started)"
		if r.Trigger != "resume" || runs[i-1].Status != "INTERRUPTED" {
			row.fail("attempts %s, want the stopped one INTERRUPTED and a resume", describeRuns(runs))
		}
		if d > chaosBound()+chaosMargin {
			row.fail("resumed %s after SIGTERM, over %s + %s margin", secs(d), secs(chaosBound()), secs(chaosMargin))
		}
	}
	if final.RetryCount != 0 {
		row.fail("retry_count = %d after a graceful stop, want 0 (a SIGTERM must not spend a retry)", final.RetryCount)
	}
	if final.FinishedAt != nil {
		row.finished = secs(final.FinishedAt.Sub(sentAt))
	}
	row.detail = fmt.Sprintf("stopped at %d/%d rows committed; worker exited %s after SIGTERM; attempts: %s; retry_count %d; %s",
		atStop.Current, atStop.Total, secs(exitedIn), describeRuns(runs), final.RetryCount, o.detail)
	e.checkFiles(row)
}

// mixedLoad is a set of submitted tasks and what each must produce.
type mixedLoad struct {
	exports   []string
	exportN   int // customers C000001… each export must contain
	imports   map[string]importFile
	importIDs []string
}

func (m *mixedLoad) all() []string {
	return append(append([]string(nil), m.importIDs...), m.exports...)
}

// check verifies every task of the load; it returns the outcome per task.
func (m *mixedLoad) check(e *env, tasks []chaosTask) map[string]outcome {
	out := map[string]outcome{}
	for _, tk := range tasks {
		if f, ok := m.imports[tk.TaskNo]; ok {
			out[tk.TaskNo] = e.checkImport(tk, f)
		} else {
			out[tk.TaskNo] = e.checkExport(tk, m.exportN)
		}
	}
	return out
}

// affectedAt lists the tasks not finished at a fault, with the attempt each was at.
func affectedAt(tasks []chaosTask) map[string]chaosTask {
	out := map[string]chaosTask{}
	for _, tk := range tasks {
		if !tk.terminal() {
			out[tk.TaskNo] = tk
		}
	}
	return out
}

// summarise fills a row's affected/recovered/lost/dup from the outcomes of the affected tasks,
// and fails the row for any task of the whole load that did not end exactly.
func summarise(row *chaosRow, affected map[string]chaosTask, outcomes map[string]outcome) {
	row.affected = len(affected)
	for no := range affected {
		o := outcomes[no]
		row.lost += o.lost
		row.dup += o.dup
		if o.exact {
			row.recovered++
		}
	}
	bad := 0
	for no, o := range outcomes {
		if !o.exact {
			if bad++; bad <= 5 {
				row.fail("%s not exact: %s (lost %d, duplicated %d)", no, o.detail, o.lost, o.dup)
			}
		}
	}
	if bad > 5 {
		row.fail("… and %d more tasks not exact", bad-5)
	}
}

// redisFault wipes (FLUSHALL) or kills and restarts a private Redis while an import runs and
// exports wait, and checks every task finishes exactly; "recovery" is how long until every
// task that was waiting at the fault is held by asynq again (or has started).
func redisFault(t *testing.T, row *chaosRow, fault string) {
	rd := startPrivateRedis(t)
	e := newChaosEnv(t, nil, rd.testenv(), nil)
	const exportN, exports = 2000, 40
	e.seedCustomers(exportN)
	imp := genImport(t, "R", chaosImportRows)
	api := e.start("api,scheduler")
	e.startBinary("worker")
	e.startBinary("worker")
	load := mixedLoad{exportN: exportN, imports: map[string]importFile{}}
	it := api.submitImport(aliceToken, imp.name, imp.content, nil)
	load.imports[it.ID] = imp
	load.importIDs = append(load.importIDs, it.ID)
	for range exports {
		load.exports = append(load.exports, api.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"code_prefix": "C"}}).ID)
	}
	e.waitRunningPast("import", it.ID, 0.3)
	before := e.mustTasks(load.all()...)
	affected := affectedAt(before)
	waiting := 0
	for _, tk := range affected {
		if tk.Status != "RUNNING" {
			waiting++
		}
	}
	faultAt := time.Now()
	switch fault {
	case "flushall":
		row.fault = fmt.Sprintf("Redis FLUSHALL mid-run (1 import of %d rows running, %d exports submitted)", chaosImportRows, exports)
		if err := rd.Client.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	case "restart":
		row.fault = fmt.Sprintf("Redis killed (SIGKILL) and restarted after 2 s, appendonly on (1 import of %d rows running, %d exports submitted)", chaosImportRows, exports)
		rd.restart(2 * time.Second)
	}
	backAt := time.Now()

	// Recovery: every task waiting at the fault is held by asynq again, or has run.
	insp := e.inspector()
	defer insp.Close()
	var handedBack time.Duration
	waitChaos(t, 60*time.Second, "every waiting task to be held by asynq again", func() (bool, error) {
		now, err := e.tasksNow(load.all()...)
		if err != nil {
			return false, err
		}
		for _, tk := range now {
			was, ok := affected[tk.TaskNo]
			if !ok || was.Status == "RUNNING" || tk.Attempt > was.Attempt || tk.terminal() {
				continue
			}
			held := false
			for _, lane := range append(jobs.Lanes("exports"), jobs.Lanes("imports")...) {
				if _, err := insp.GetTaskInfo(lane, jobs.JobID(tk.TaskNo, tk.Attempt)); err == nil {
					held = true
				}
			}
			if !held {
				return false, nil
			}
		}
		handedBack = time.Since(faultAt)
		return true, nil
	})
	if fault == "flushall" {
		// The console and the queue metrics see only the queues in asynq's queue list, which
		// the flush emptied: the workers write theirs back.
		waitChaos(t, 30*time.Second, "asynq to list every queue again", func() (bool, error) {
			qs, err := insp.Queues()
			if err != nil {
				return false, nil
			}
			for _, lane := range append(jobs.Lanes("exports"), jobs.Lanes("imports")...) {
				if !slices.Contains(qs, lane) {
					return false, nil
				}
			}
			return true, nil
		})
	}
	final := e.waitTerminal(3*time.Minute, load.all()...)
	outcomes := load.check(e, final)
	summarise(row, affected, outcomes)
	row.recovery = fmt.Sprintf("%s (fault → every waiting task back in asynq)", secs(handedBack))
	var last time.Time
	for _, tk := range final {
		if _, ok := affected[tk.TaskNo]; ok && tk.FinishedAt != nil && tk.FinishedAt.After(last) {
			last = *tk.FinishedAt
		}
	}
	row.finished = secs(last.Sub(faultAt))
	row.detail = fmt.Sprintf("at the fault %d tasks running, %d waiting", len(affected)-waiting, waiting)
	if fault == "restart" {
		row.detail += fmt.Sprintf("; Redis answered again %s after the kill", secs(backAt.Sub(faultAt)))
	}
	row.detail += fmt.Sprintf("; import attempts: %s; all %d tasks checked", describeRuns(e.mustRuns(e.mustTask(it.ID).ID)), len(final))
	e.checkFiles(row)
}

// postgresRestart restarts a private Postgres (pg_ctl restart -m mode) mid-import.
func postgresRestart(t *testing.T, row *chaosRow, mode string) {
	row.fault = fmt.Sprintf("Postgres restart (pg_ctl restart -m %s) mid-import (%d rows)", mode, chaosImportRows)
	pg := startPrivatePostgres(t)
	e := newChaosEnv(t, pg.testenv(), nil, nil)
	imp := genImport(t, "P", chaosImportRows)
	api := e.start("api,scheduler")
	e.startBinary("worker")
	e.startBinary("worker")
	task := api.submitImport(aliceToken, imp.name, imp.content, nil)
	row.affected = 1
	atFault := e.waitRunningPast("import", task.ID, 0.4)
	faultAt := time.Now()
	pg.restart(mode)
	upAfter := time.Since(faultAt)

	final := e.waitTerminal(2*time.Minute, task.ID)[0]
	o := e.checkImport(final, imp)
	row.recordOne(o)
	runs := e.mustRuns(final.ID)
	row.recovery = "same attempt continued"
	for _, r := range runs {
		if r.Attempt == atFault.Attempt+1 {
			row.recovery = fmt.Sprintf("%s (restart → %s attempt started)", secs(r.StartedAt.Sub(faultAt)), r.Trigger)
		}
	}
	if final.FinishedAt != nil {
		row.finished = secs(final.FinishedAt.Sub(faultAt))
	}
	row.detail = fmt.Sprintf("restarted at %d/%d rows committed; Postgres accepted connections again %s after the restart began; attempts: %s; retry_count %d; %s",
		atFault.Current, atFault.Total, secs(upAfter), describeRuns(runs), final.RetryCount, o.detail)
	e.checkFiles(row)
}

// twoWorkersKilled queues 300 short exports and 5 imports, starts three workers and SIGKILLs
// two of them in turn while a backlog waits: the tasks of each dead worker must be taken over
// within the bound although over a hundred new tasks were queued before them (the resume
// lane). The exports are short so that slots free often: a takeover waits for a free slot
// (workers do not preempt), and that wait is not what the bound is about.
func twoWorkersKilled(t *testing.T, first, second *chaosRow) {
	const (
		exportN    = 500
		exports    = 300
		imports    = 5
		importRows = 20000
	)
	// Five import slots per worker: any one survivor has room for every import, so a
	// takeover waits only for the queue, not for another import to end (workers do not
	// preempt running tasks; see docs/reliability.md).
	e := newChaosEnv(t, nil, nil, map[string]string{
		"TASKCENTER_QUEUES_EXPORTS_BACKLOG_LIMIT": "0",
		"TASKCENTER_QUEUES_IMPORTS_CONCURRENCY":   fmt.Sprint(imports),
	})
	e.seedCustomers(exportN)
	load := mixedLoad{exportN: exportN, imports: map[string]importFile{}}
	files := make([]importFile, imports)
	for i := range files {
		files[i] = genImport(t, fmt.Sprintf("M%d", i+1), importRows)
	}
	api := e.start("api,scheduler")
	// The whole load is queued before any worker starts: a backlog of new work that the
	// taken-over tasks must not wait behind.
	for range exports {
		load.exports = append(load.exports, api.submitExport(aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"code_prefix": "C"}}).ID)
	}
	for _, f := range files {
		tk := api.submitImport(aliceToken, f.name, f.content, nil)
		load.imports[tk.ID] = f
		load.importIDs = append(load.importIDs, tk.ID)
	}
	w1 := e.startBinary("worker")
	rest := []*binProc{e.startBinary("worker"), e.startBinary("worker")}

	// kill waits until w runs at least four tasks, one of them an import under way (for up
	// to importWait, then any four tasks do), SIGKILLs it, and records the takeovers.
	kill := func(row *chaosRow, w *binProc, ordinal string, importWait time.Duration) (map[string]chaosTask, time.Time) {
		began := time.Now()
		waitChaos(t, 60*time.Second, "the "+ordinal+" worker to be busy", func() (bool, error) {
			tasks, err := e.tasksNow(load.all()...)
			n, importing := 0, false
			for _, tk := range tasks {
				if tk.Status == "RUNNING" && tk.Worker == workerID(w) {
					n++
					importing = importing || (tk.Type == "import:customers" && tk.Current*10 >= tk.Total && tk.Total > 0)
				}
			}
			return n >= 4 && (importing || time.Since(began) > importWait), err
		})
		w.signal(syscall.SIGKILL, 10*time.Second)
		killedAt := time.Now()
		tasks := e.mustTasks(load.all()...)
		victims := map[string]chaosTask{}
		queued := 0
		queuedAt := map[string]bool{} // new tasks waiting at the kill
		kinds := map[string]int{}
		for _, tk := range tasks {
			switch {
			case tk.Status == "RUNNING" && tk.Worker == workerID(w):
				victims[tk.TaskNo] = tk
				kinds[strings.SplitN(tk.Type, ":", 2)[0]]++
			case tk.Status == "PENDING":
				queued++
				queuedAt[tk.TaskNo] = true
			}
		}
		row.detail = fmt.Sprintf("%s worker killed running %d exports and %d imports, with %d new tasks queued", ordinal, kinds["export"], kinds["import"], queued)
		// Wait until every victim has been taken over, then record the times.
		lanes := newLaneWatch(e, victims)
		waitChaos(t, 60*time.Second, "the dead worker's tasks to be taken over", func() (bool, error) {
			lanes.poll()
			now, err := e.tasksNow(load.all()...)
			if err != nil {
				return false, err
			}
			for _, tk := range now {
				if v, ok := victims[tk.TaskNo]; ok && tk.Attempt == v.Attempt && !tk.terminal() {
					return false, nil
				}
			}
			return true, nil
		})
		var started, inRedis, stale []time.Duration
		byKind := map[string][]time.Duration{}
		jumped := 0
		for _, v := range victims {
			to, ok := checkTakeover(e, row, v, v.Attempt, killedAt, lanes)
			if !ok {
				continue
			}
			started = append(started, to.started)
			inRedis = append(inRedis, to.inRedis)
			stale = append(stale, to.stale)
			kind := strings.SplitN(v.Type, ":", 2)[0]
			byKind[kind] = append(byKind[kind], to.started)
			if !to.inAt.IsZero() {
				jumped = max(jumped, e.startedBetween(v.Type, queuedAt, to.inAt, to.startAt))
			}
		}
		row.recovery = fmt.Sprintf("%s (kill → takeover attempt started; heartbeat stale: %s; job in the resume lane: %s)",
			spread(started), spread(stale), spread(inRedis))
		row.detail += fmt.Sprintf("; queued new tasks that started while a taken-over one waited in the resume lane: %d", jumped)
		row.detail += fmt.Sprintf("; slowest takeover: exports %s, imports %s", maxOrDash(byKind["export"]), maxOrDash(byKind["import"]))
		t.Logf("%s kill: %s", ordinal, e.cleanupTrace(killedAt, chaosBound()+chaosMargin+time.Second))
		return victims, killedAt
	}
	v1, k1 := kill(first, w1, "1st", 30*time.Second)
	// The second victim is the survivor running more of the imports (most of them taken
	// over from the first), so some tasks die twice; the other worker is left alone.
	w2 := rest[0]
	count := func(w *binProc) int {
		n := 0
		for _, tk := range e.mustTasks(load.importIDs...) {
			if tk.Status == "RUNNING" && tk.Worker == workerID(w) {
				n++
			}
		}
		return n
	}
	if count(rest[1]) > count(rest[0]) {
		w2 = rest[1]
	}
	v2, k2 := kill(second, w2, "2nd", 5*time.Second)

	final := e.waitTerminal(5*time.Minute, load.all()...)
	outcomes := load.check(e, final)
	summarise(first, v1, outcomes)
	summarise(second, v2, outcomes)
	for _, p := range []struct {
		row     *chaosRow
		victims map[string]chaosTask
		at      time.Time
	}{{first, v1, k1}, {second, v2, k2}} {
		var last time.Time
		twice := 0
		for _, tk := range final {
			if _, ok := p.victims[tk.TaskNo]; ok && tk.FinishedAt != nil && tk.FinishedAt.After(last) {
				last = *tk.FinishedAt
			}
			_, in1 := v1[tk.TaskNo]
			_, in2 := v2[tk.TaskNo]
			if in1 && in2 {
				twice++
			}
		}
		p.row.finished = secs(last.Sub(p.at)) + " (its tasks)"
		if p.row == second {
			p.row.detail += fmt.Sprintf("; %d of them had already been taken over from the 1st", twice)
		}
		p.row.detail += fmt.Sprintf("; all %d tasks (%d exports of %d rows, %d imports of %d rows) checked; under this load an export attempt took %s and an import %s (medians)",
			len(final), exports, exportN, imports, importRows, secs(e.medianRun("export:customers")), secs(e.medianRun("import:customers")))
	}
	e.checkFiles(second)
}
