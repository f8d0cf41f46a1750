package importer

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/jobstest"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// world runs the importer under the real runtime (jobstest) against a Postgres schema and a
// Redis database of its own, one delivery at a time: the test drives each attempt with
// deliver and steps in between batches with Importer.afterCommit.
type world struct {
	t  *testing.T
	jw *jobstest.World
	pg *storetest.Postgres
	st *store.Store
	fs storage.Store
	rt *jobs.Runtime
	im *Importer
}

func newWorld(t *testing.T, cfg Config) *world {
	t.Helper()
	return newWorldOn(t, cfg, storage.Config{})
}

// newWorldOn is newWorld with the uploads and reports kept in the given store.
func newWorldOn(t *testing.T, cfg Config, sc storage.Config) *world {
	t.Helper()
	jw := jobstest.New(t, sc)
	cfg.BatchSize = max(cfg.BatchSize, 1)
	cfg.ReportTTL = time.Hour
	im := New(jw.Store, jw.Files, cfg)
	rt := jw.Runtime(im, jobs.TypePolicy{MaxRetry: 3, RetryBase: time.Second, MaxRuntime: time.Minute})
	return &world{t: t, jw: jw, pg: jw.PG, st: jw.Store, fs: jw.Files, rt: rt, im: im}
}

// submit stores the file as an upload and creates its task, as the API would (params from
// Inspect, so what submit would have refused is refused here too).
func (w *world) submit(name string, content []byte) *store.Task {
	w.t.Helper()
	p := w.upload(name, content)
	p.Mode = ModeUpsert
	if ins, err := sheet.Inspect(bytes.NewReader(content), int64(len(content)), sheet.Choice{Format: p.Format}, sheet.Options{IsHeader: isHeader}); err == nil {
		p.Rows = ins.Rows
	}
	return w.createImport(p)
}

// upload stores the file as an upload and returns the import's params naming it.
func (w *world) upload(name string, content []byte) Params {
	w.t.Helper()
	format, err := sheet.FormatOf(name)
	if err != nil {
		w.t.Fatal(err)
	}
	rel := storage.Uploads + "/" + rand.Text() + "." + string(format)
	if _, err := w.fs.Put(context.Background(), rel, bytes.NewReader(content), int64(len(content)), ""); err != nil {
		w.t.Fatal(err)
	}
	return Params{Upload: rel, Format: format, Filename: name}
}

// createImport creates alice's import task of p, titled as submit titles it.
func (w *world) createImport(p Params) *store.Task {
	w.t.Helper()
	params, _ := json.Marshal(p)
	title := jobs.NewTitle(p.TitleMessage())
	return w.create(w.t, jobs.Submission{Type: Type, Owner: "alice", Params: params, Title: title.Text, TitleMessage: title.Message})
}

// create creates the task of sub (an import's or an undo's) on the imports queue, as the API
// would.
func (w *world) create(t testing.TB, sub jobs.Submission) *store.Task {
	t.Helper()
	return w.jw.Create(t, store.NewTask{Type: sub.Type, Owner: sub.Owner, Queue: "imports", MaxRetry: 3, TimeoutSeconds: 600,
		Params: sub.Params, BizKey: sub.BizKey, Title: sub.Title, TitleMessage: sub.TitleMessage})
}

// deliver runs one attempt of the task, as an asynq delivery would, and returns the row after.
func (w *world) deliver(task *store.Task) *store.Task {
	w.t.Helper()
	return w.jw.Deliver(w.rt, task)
}

func (w *world) count(q string, args ...any) int {
	w.t.Helper()
	return storetest.Count(w.t, w.pg.DB, q, args...)
}

func (w *world) logs(task *store.Task) string {
	w.t.Helper()
	entries, err := w.st.RecentLogs(context.Background(), task.ID, 50)
	if err != nil {
		w.t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

// customersCSV is a header and n valid rows, codes prefix1…prefixN, and a trailing newline.
func customersCSV(prefix string, n int) []byte {
	var b bytes.Buffer
	b.WriteString("code,name,phone\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s%d,name %d,138%08d\n", prefix, i, i, i)
	}
	return b.Bytes()
}

func TestCancelAfterTheLastBatchKeepsTheOutcome(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 5})
	cancelAfter := func(batch int) func(ctx context.Context, run *jobs.Run, n int) {
		return func(ctx context.Context, run *jobs.Run, n int) {
			if n == batch {
				if _, err := w.st.Cancel(ctx, run.Lease.TaskNo, store.Scope{Admin: true}); err != nil {
					t.Error(err)
				}
			}
		}
	}
	// Ten rows, two batches: the cancel lands after the first and is noticed when the second
	// (the last) commits. Every row is written, so the import ends SUCCESS.
	w.im.afterCommit = cancelAfter(1)
	task := w.deliver(w.submit("ten.csv", customersCSV("L", 10)))
	if task.Status != store.StatusSuccess || task.SuccessCount != 10 {
		t.Fatalf("after a late cancel: %s with %d imported, want SUCCESS with 10", task.Status, task.SuccessCount)
	}
	if logs := w.logs(task); !strings.Contains(logs, "the cancel came too late") {
		t.Fatalf("no log line about the late cancel:\n%s", logs)
	}
	// Fifteen rows: the same cancel leaves a batch unwritten, so it wins.
	task = w.deliver(w.submit("fifteen.csv", customersCSV("M", 15)))
	if task.Status != store.StatusCancelled || task.SuccessCount != 10 {
		t.Fatalf("after a cancel with rows left: %s with %d imported, want CANCELLED with 10", task.Status, task.SuccessCount)
	}
}

// A superseded attempt that reaches finish must not overwrite, and then (when its result
// is discarded) delete, the live attempt's error report.
func TestSupersededAttemptLeavesTheLiveReportAlone(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 1000})
	bad := append(customersCSV("Z", 3), "Z9,no phone,\n"...)
	var live string
	w.im.afterCommit = func(ctx context.Context, run *jobs.Run, n int) {
		// Another worker takes the task over (attempt 2) and writes its report.
		c, err := w.st.ClaimTask(ctx, run.Lease.TaskID, "other", 0)
		if err != nil {
			t.Errorf("takeover: %v", err)
			return
		}
		live = w.jw.Path(reportPath(c.Lease))
		if err := os.MkdirAll(filepath.Dir(live), 0o750); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(live, []byte("the live attempt's report"), 0o600); err != nil {
			t.Error(err)
		}
	}
	task := w.deliver(w.submit("bad.csv", bad))
	if task.Attempt != 2 || task.Status != store.StatusRunning {
		t.Fatalf("task = %s attempt %d; the takeover did not happen", task.Status, task.Attempt)
	}
	if b, err := os.ReadFile(live); err != nil || string(b) != "the live attempt's report" {
		t.Fatalf("the live report at %s: %q, %v", live, b, err)
	}
	// Even past the check that the row is still ours, the report is named after the lease.
	l := store.Lease{TaskID: task.ID, TaskNo: task.TaskNo, Attempt: 1}
	rel, _, err := writeErrorReport(context.Background(), w.st, w.fs, l, storage.AttemptPrefix(l.TaskNo, l.Attempt), []string{"code", "name", "phone"}, LangEN)
	if err != nil || rel != storage.Results+"/"+task.TaskNo+"-a1-errors.xlsx" {
		t.Fatalf("report of attempt 1 at %q, %v", rel, err)
	}
	if b, _ := os.ReadFile(live); string(b) != "the live attempt's report" {
		t.Fatal("attempt 1's report overwrote attempt 2's")
	}
}

// headerRow is row 1 with the three required columns, inline strings.
const headerRow = `<row r="1"><c r="A1" t="inlineStr"><is><t>code</t></is></c><c r="B1" t="inlineStr"><is><t>name</t></is></c><c r="C1" t="inlineStr"><is><t>phone</t></is></c></row>`

// workbookOf is a one-sheet workbook whose worksheet is the XML given.
func workbookOf(t *testing.T, worksheet string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range []struct{ name, body string }{
		{"[Content_Types].xml", `<Types/>`},
		{"xl/workbook.xml", `<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		{"xl/_rels/workbook.xml.rels", `<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`},
		{"xl/worksheets/sheet1.xml", worksheet},
	} {
		w, err := zw.Create(p.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(p.body)) //nolint:errcheck
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRowLimitInTheWorker(t *testing.T) {
	t.Parallel()
	lim := sheet.Limits{MaxRows: 50}
	// Declares two rows, holds 200: counted before the first batch, nothing written.
	var lying strings.Builder
	lying.WriteString(`<worksheet><dimension ref="A1:C2"/><sheetData>` + headerRow)
	for i := 2; i <= 201; i++ {
		fmt.Fprintf(&lying, `<row r="%d"><c t="inlineStr"><is><t>D%d</t></is></c><c t="inlineStr"><is><t>n</t></is></c><c><v>138%08d</v></c></row>`, i, i, i)
	}
	lyingBook := workbookOf(t, lying.String()+`</sheetData></worksheet>`)
	// Ten rows, then row 100: the count sees 12 rows, the reader meets row 100.
	var gap strings.Builder
	gap.WriteString(`<worksheet><sheetData>` + headerRow)
	for i := 2; i <= 11; i++ {
		fmt.Fprintf(&gap, `<row r="%d"><c t="inlineStr"><is><t>G%d</t></is></c><c t="inlineStr"><is><t>n</t></is></c><c><v>138%08d</v></c></row>`, i, i, i)
	}
	gap.WriteString(`<row r="100"><c t="inlineStr"><is><t>G100</t></is></c><c t="inlineStr"><is><t>n</t></is></c><c><v>13800000100</v></c></row></sheetData></worksheet>`)
	gapBook := workbookOf(t, gap.String())

	for _, c := range []struct {
		name      string
		batch     int
		book      []byte
		status    store.Status
		customers int
		says      string
	}{
		{"a lying dimension fails before any batch", 5, lyingBook, store.StatusFailed, 0, "has 200 rows, over the limit of 50"},
		{"a row past the limit with rows committed", 5, gapBook, store.StatusPartialSuccess, 10, "rows after row 51 were not imported"},
		{"a row past the limit before any batch", 1000, gapBook, store.StatusFailed, 0, "has 99 rows, over the limit of 50"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, Config{BatchSize: c.batch, Limits: lim})
			task := w.deliver(w.submit("f.xlsx", c.book))
			n := w.count("SELECT count(*) FROM customers")
			says := task.ErrorMessage + string(task.Result)
			if task.Status != c.status || n != c.customers || !strings.Contains(says, c.says) || task.RetryCount != 0 {
				t.Fatalf("%s, %d customers, retries %d, %q; want %s, %d customers, saying %q", task.Status, n, task.RetryCount, says, c.status, c.customers, c.says)
			}
		})
	}
}

// Progress counts data rows: a CSV of 120 rows and a trailing newline ends at 120/120.
func TestProgressCountsDataRows(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{BatchSize: 50, Limits: sheet.Limits{MaxRows: 120}})
	var seen []string
	w.im.afterCommit = func(ctx context.Context, run *jobs.Run, n int) {
		task, _ := w.st.GetByID(ctx, run.Lease.TaskID)
		seen = append(seen, fmt.Sprintf("%d/%d", task.ProgressCurrent, task.ProgressTotal))
	}
	sub := w.submit("p.csv", customersCSV("P", 120))
	var p Params
	json.Unmarshal(sub.Params, &p) //nolint:errcheck
	task := w.deliver(sub)
	if p.Rows != 120 || task.Status != store.StatusSuccess || strings.Join(seen, " ") != "50/120 100/120 120/120" ||
		task.ProgressCurrent != 120 || task.ProgressTotal != 120 {
		t.Fatalf("params rows %d; %s; progress %v, final %d/%d", p.Rows, task.Status, seen, task.ProgressCurrent, task.ProgressTotal)
	}
}

// A rejected row stored with 20,000 columns (by an older version, or any other way) still
// makes a report: a sheet holds 16,384 columns and the writer keeps within them.
func TestErrorReportIsAlwaysWritable(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Config{})
	task := w.submit("x.csv", customersCSV("R", 1))
	wide := make([]string, 20_000)
	for i := range wide {
		wide[i] = "=cell"
	}
	raw, _ := json.Marshal(wide)
	long := strings.Repeat("x", 40_000)
	err := w.pg.DB.RunInTx(context.Background(), nil, func(ctx context.Context, tx bun.Tx) error {
		return store.InsertItems(ctx, tx, []store.Item{{TaskID: task.ID, Row: 2, Field: "name", Message: "name: " + long, Raw: raw}})
	})
	if err != nil {
		t.Fatal(err)
	}
	header := make([]string, 20_000)
	for i := range header {
		header[i] = fmt.Sprintf("h%d", i)
	}
	l := store.Lease{TaskID: task.ID, TaskNo: task.TaskNo, Attempt: 1}
	rel, first, err := writeErrorReport(context.Background(), w.st, w.fs, l, storage.AttemptPrefix(l.TaskNo, l.Attempt), header, LangEN)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	f, err := excelize.OpenFile(w.jw.Path(rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, _ := f.GetRows("errors")
	if len(rows) != 2 || len(rows[0]) != 3+maxRawCells || len(rows[1]) != 3+maxRawCells || rows[1][3] != "'=cell" || len(first.texts) != 1 || len(first.texts[0]) > 600 || len(first.messages) != 1 {
		t.Fatalf("report rows %d, header %d columns, row %d columns, first cell %q, first errors %d", len(rows), len(rows[0]), len(rows[1]), rows[1][3], len(first.texts))
	}
	if matches, _ := filepath.Glob(filepath.Join(w.fs.TempDir(), "*")); len(matches) != 0 {
		t.Fatalf("temp files left: %v", matches)
	}
}
