package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
)

// messyOutcome is what every producer's rendering of testdata/imports/messy.json must give:
// the rejected rows and why; all other non-blank rows are imported.
var messyOutcome = map[int]string{
	4:  "email: is not a valid email address",
	6:  "phone: must be 11 digits starting with 1",
	7:  "name: is required",
	8:  "code: C002 already appears in row 3",
	9:  "level: must be normal, silver, gold, platinum or diamond",
	10: "code: must be 1 to 32 letters, digits",
	13: "name: must be at most 100 characters (this one has 101)",
}

// producerQuirks are where a producer legitimately stores a row differently. openpyxl
// writes a string starting with "=" as a formula with no saved value, so the cell reads
// empty; LibreOffice calculates that formula on conversion, so the cell holds its result.
var producerQuirks = map[string]map[int]string{
	"messy-openpyxl.xlsx":    {10: "code: is required"},
	"messy-libreoffice.xlsx": {10: "code: must be 1 to 32 letters, digits"},
}

// messyCustomers are the rows that must land, as stored.
var messyCustomers = map[string][3]string{ // code → name, phone, level
	"C001": {"张三", "13800138000", "gold"},
	"C002": {"李四", "13800138001", "silver"},
	"C007": {"孙八", "13800138007", "diamond"},
	"C008": {"周九", "13800138008", "platinum"},
	"C010": {"吴十", "13800138010", "normal"},
	"C011": {"郑十一", "13800138011", "normal"},
	"C012": {"王十二", "13800138012", "normal"},
	"1001": {"Numeric Code", "13800138013", "normal"},
}

// excelizeMessy renders messy.json with excelize: numbers as numeric cells, shared strings.
func excelizeMessy(t *testing.T) []byte {
	t.Helper()
	var spec struct {
		Header []string
		Rows   []struct {
			Row   int
			Cells []any
		}
	}
	if err := json.Unmarshal(sheettest.Fixture(t, "messy.json"), &spec); err != nil {
		t.Fatal(err)
	}
	f := excelize.NewFile()
	header := make([]any, len(spec.Header))
	for i, h := range spec.Header {
		header[i] = h
	}
	f.SetSheetRow("Sheet1", "A1", &header) //nolint:errcheck
	for _, r := range spec.Rows {
		cells := r.Cells
		for i, c := range cells {
			if n, ok := c.(float64); ok {
				cells[i] = int64(n)
			}
		}
		f.SetSheetRow("Sheet1", fmt.Sprintf("A%d", r.Row), &cells) //nolint:errcheck
	}
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// importMessy imports content, the messy sheet as one producer wrote it, as alice's file name
// and fails the test unless it ends as that sheet must: PARTIAL_SUCCESS, 15 rows read, 8
// imported and 7 rejected.
func (p *proc) importMessy(name string, content []byte) taskJSON {
	p.t.Helper()
	task := p.submitImport(aliceToken, name, content, nil)
	final := p.waitStatus(aliceToken, task.ID, 3*time.Minute, "PARTIAL_SUCCESS", "SUCCESS", "FAILED")
	if final.Status != "PARTIAL_SUCCESS" || final.Counts.Total != 15 || final.Counts.Success != 8 || final.Counts.Failed != 7 {
		p.t.Fatalf("import of %s: %s counts %+v error %+v", name, final.Status, final.Counts, final.Error)
	}
	return final
}

// exportThenImport is the service's round trip on p: alice's customer export, which must write
// all rows seeded customers, then the messy import (after the export: the import adds
// customers, which an export still reading would count). It returns the finished export.
func (p *proc) exportThenImport(rows int64) taskJSON {
	p.t.Helper()
	export := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	done := p.waitStatus(aliceToken, export.ID, 3*time.Minute, "SUCCESS", "FAILED")
	if done.Status != "SUCCESS" || done.Result.Rows != rows {
		p.t.Fatalf("export of %d customers: %+v", rows, done)
	}
	p.importMessy("messy.xlsx", excelizeMessy(p.t))
	return done
}

func TestImportMessyFilesFromSeveralProducers(t *testing.T) {
	t.Parallel()
	files := map[string]func(t *testing.T) []byte{"messy-excelize.xlsx": excelizeMessy}
	for _, name := range []string{"messy-openpyxl.xlsx", "messy-exceljs.xlsx", "messy-sheetjs.xlsx", "messy-libreoffice.xlsx", "messy-bom.csv"} {
		files[name] = func(t *testing.T) []byte { return sheettest.Fixture(t, name) }
	}
	for name, content := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, p := startEnv(t, nil, "all")
			final := p.importMessy(name, content(t))
			if s := final.Result.Summary; s == nil || s.Total != 15 || s.Success != 8 || s.Failed != 7 {
				t.Fatalf("summary = %+v", final.Result.Summary)
			}
			if fe := final.Result.FirstErrors; len(fe) != 7 || !strings.HasPrefix(fe[0], "row 4, email: is not a valid email address") {
				t.Fatalf("first_errors = %q", fe)
			}
			items := e.items(final.ID)
			if len(items) != len(messyOutcome) {
				t.Errorf("rejected rows = %v, want rows %v", items, messyOutcome)
			}
			for row, want := range messyOutcome {
				if alt, ok := producerQuirks[name][row]; ok {
					want = alt
				}
				if !strings.Contains(items[row], want) {
					t.Errorf("row %d: %q, want %q", row, items[row], want)
				}
			}
			var got []struct {
				Code, Name, Phone, Level, Email string
			}
			if err := e.db().NewRaw("SELECT code, name, phone, level, email FROM customers").Scan(context.Background(), &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(messyCustomers) {
				t.Errorf("customers = %d rows %+v, want %d", len(got), got, len(messyCustomers))
			}
			for _, c := range got {
				want, ok := messyCustomers[c.Code]
				if !ok || c.Name != want[0] || c.Phone != want[1] || c.Level != want[2] {
					t.Errorf("customer %+v, want %v", c, want)
				}
				if c.Code == "C008" && c.Email != "zhou@example.com" {
					t.Errorf("C008 email = %q, want lower-cased", c.Email)
				}
			}

			// The error report: one line per rejected row, original cells, formulas neutralised.
			res := p.do("GET", "/api/v1/tasks/"+final.ID+"/error-report", aliceToken, nil)
			if res.status != http.StatusOK {
				t.Fatalf("error report: %d %s", res.status, res.body)
			}
			rows := readReport(t, res.body)
			if len(rows) != 1+len(messyOutcome) || rows[0][0] != "row" || rows[0][3] != "客户编号" {
				t.Fatalf("report rows = %d, header %v", len(rows), rows[0])
			}
			for _, r := range rows[1:] {
				for _, c := range r {
					if c != "" && strings.ContainsRune("=+-@", rune(c[0])) {
						t.Errorf("report row %s has a cell a spreadsheet would run: %q", r[0], c)
					}
				}
				if _, quirk := producerQuirks[name][10]; r[0] == "10" && !quirk && r[3] != `'=HYPERLINK("http://x")` {
					t.Errorf("row 10 code cell in report = %q, want the original value neutralised", r[3])
				}
			}
		})
	}
}

func TestImportInsertModeRejectsExistingCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.seedCustomers(0, [3]string{"C001", "old name", "13900000000"})
	p := e.start("all")
	task := p.submitImport(aliceToken, "messy.xlsx", excelizeMessy(t), map[string]string{"mode": "insert"})
	final := p.waitStatus(aliceToken, task.ID, 3*time.Minute, "PARTIAL_SUCCESS", "FAILED")
	items := e.items(task.ID)
	if final.Counts.Failed != 8 || !strings.Contains(items[2], "code: C001 already exists") {
		t.Fatalf("insert mode: counts %+v, row 2 %q", final.Counts, items[2])
	}
	var name string
	e.db().NewRaw("SELECT name FROM customers WHERE code = 'C001'").Scan(context.Background(), &name) //nolint:errcheck
	if name != "old name" {
		t.Fatalf("insert mode overwrote C001: %q", name)
	}
	// The same file in upsert mode is a different task, and updates C001.
	up := p.submitImport(aliceToken, "messy.xlsx", excelizeMessy(t), map[string]string{"mode": "upsert"})
	p.waitStatus(aliceToken, up.ID, 3*time.Minute, "PARTIAL_SUCCESS")
	e.db().NewRaw("SELECT name FROM customers WHERE code = 'C001'").Scan(context.Background(), &name) //nolint:errcheck
	if name != "张三" {
		t.Fatalf("upsert did not update C001: %q", name)
	}
}

func TestConcurrentIdenticalImportsMakeOneTaskAndOneFile(t *testing.T) {
	t.Parallel()
	// One user's 50 uploads at once: raise the per-user upload cap, which this test is not about.
	e, p := startEnv(t, map[string]string{"TASKCENTER_IMPORT_MAX_CONCURRENT_UPLOADS": "64"}, "api")
	content := excelizeMessy(t)
	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ids      = map[string]bool{}
		accepted int
	)
	for range n {
		wg.Go(func() {
			res := p.upload(aliceToken, "customers.xlsx", content, nil)
			var out struct {
				Task      taskJSON
				Duplicate bool
			}
			res.json(t, &out)
			mu.Lock()
			defer mu.Unlock()
			ids[out.Task.ID] = true
			switch {
			case res.status == http.StatusAccepted && !out.Duplicate:
				accepted++
			case res.status == http.StatusOK && out.Duplicate:
			default:
				t.Errorf("submit: %d %s", res.status, res.body)
			}
		})
	}
	wg.Wait()
	if accepted != 1 || len(ids) != 1 {
		t.Fatalf("%d accepted, %d distinct tasks; want one task for %d identical submits", accepted, len(ids), n)
	}
	if c := e.count("SELECT count(*) FROM tasks"); c != 1 {
		t.Fatalf("tasks = %d", c)
	}
	uploads, _ := filepath.Glob(filepath.Join(e.dataDir, "uploads", "*"))
	temps, _ := filepath.Glob(filepath.Join(e.dataDir, "tmp", "*"))
	if len(uploads) != 1 || len(temps) != 0 {
		t.Fatalf("uploads %v, temp files %v; want one stored file and no leftovers", uploads, temps)
	}
	if strings.Contains(uploads[0], "customers") {
		t.Fatalf("the upload is stored under the client's name: %s", uploads[0])
	}
	// Another user uploading the same file gets their own task.
	if res := p.upload(bobToken, "customers.xlsx", content, nil); res.status != http.StatusAccepted {
		t.Fatalf("bob's identical upload: %d", res.status)
	}
}

// sheetBytes is the .xlsx that build writes into a new excelize workbook.
func sheetBytes(t *testing.T, build func(f *excelize.File)) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	build(f)
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zipBomb(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"[Content_Types].xml", "xl/workbook.xml"} {
		w, _ := zw.Create(name)
		w.Write([]byte("<x/>")) //nolint:errcheck
	}
	w, _ := zw.Create("xl/worksheets/sheet1.xml")
	zero := make([]byte, 1<<20)
	for range size >> 20 {
		w.Write(zero) //nolint:errcheck
	}
	zw.Close()
	return buf.Bytes()
}

func TestBadFilesGetAClearAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{
		"TASKCENTER_IMPORT_MAX_UPLOAD_BYTES":       "2097152",  // 2 MiB
		"TASKCENTER_IMPORT_MAX_UNCOMPRESSED_BYTES": "16777216", // 16 MiB
		"TASKCENTER_IMPORT_MAX_ROWS":               "50",
	})
	p := e.start("all")
	header := &[]any{"code", "name", "phone"}
	valid := sheetBytes(t, func(f *excelize.File) {
		f.SetSheetRow("Sheet1", "A1", header)                                      //nolint:errcheck
		f.SetSheetRow("Sheet1", "A2", &[]any{"C1", "n", "13800138000"})            //nolint:errcheck
		f.NewSheet("Second")                                                       //nolint:errcheck
		f.SetSheetRow("Second", "A1", header)                                      //nolint:errcheck
		f.SetSheetRow("Second", "A2", &[]any{"S1", "second sheet", "13800138000"}) //nolint:errcheck
	})
	gbk, _ := os.ReadFile("../../testdata/imports/messy-gbk.csv")
	tooMany := sheetBytes(t, func(f *excelize.File) {
		f.SetSheetRow("Sheet1", "A1", header) //nolint:errcheck
		for i := 2; i <= 60; i++ {
			f.SetSheetRow("Sheet1", fmt.Sprintf("A%d", i), &[]any{fmt.Sprintf("C%d", i), "n", "13800138000"}) //nolint:errcheck
		}
	})

	submitErrors := []struct {
		name     string
		filename string
		content  []byte
		fields   map[string]string
		status   int
		code     string
		detail   string
	}{
		{"empty file", "a.xlsx", nil, nil, 422, "empty_file", "the file is empty"},
		{"not a spreadsheet renamed .xlsx", "a.xlsx", []byte("just some text, honestly"), nil, 415, "unsupported_format", "not an .xlsx workbook"},
		{"a PDF renamed .xlsx", "a.xlsx", []byte("%PDF-1.7 ..."), nil, 415, "unsupported_format", "PDF"},
		{"a damaged .xls", "a.xls", []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0}, nil, 422, "damaged_file", "the .xls file is damaged"},
		{"a word document", "a.docx", valid, nil, 415, "unsupported_format", "only .xlsx, .xls and .csv"},
		{"corrupted zip", "a.xlsx", valid[:len(valid)/2], nil, 422, "damaged_file", "damaged"},
		{"zip bomb", "a.xlsx", zipBomb(t, 64<<20), nil, 413, "too_large_uncompressed", "expands to 64 MB"},
		{"too large", "a.xlsx", bytes.Repeat([]byte("x"), 3<<20), nil, 413, "too_large", "2 MB limit"},
		{"wrong sheet", "a.xlsx", valid, map[string]string{"sheet": "Nope"}, 422, "sheet_not_found", `no sheet named "Nope"; it has: Sheet1, Second`},
		{"too many rows", "a.xlsx", tooMany, nil, 422, "too_many_rows", "59 rows, over the limit of 50"},
		{"legacy encoding CSV sent as UTF-8", "a.csv", gbk, map[string]string{"encoding": "utf-8"}, 422, "not_utf8", "not UTF-8"},
		{"bad mode", "a.xlsx", valid, map[string]string{"mode": "merge"}, 422, "bad_mode", "upsert, insert or replace"},
	}
	for _, c := range submitErrors {
		t.Run(c.name, func(t *testing.T) {
			res := p.upload(aliceToken, c.filename, c.content, c.fields)
			var prob struct{ Code, Detail string }
			json.Unmarshal(res.body, &prob) //nolint:errcheck
			if res.status != c.status || prob.Code != c.code || !strings.Contains(prob.Detail, c.detail) {
				t.Fatalf("%d %s, want %d %s containing %q", res.status, res.body, c.status, c.code, c.detail)
			}
		})
	}
	if n := e.count("SELECT count(*) FROM tasks"); n != 0 {
		t.Fatalf("refused uploads left %d tasks", n)
	}
	if temps, _ := filepath.Glob(filepath.Join(e.dataDir, "tmp", "*")); len(temps) != 0 {
		t.Fatalf("refused uploads left temp files: %v", temps)
	}

	failures := []struct {
		name    string
		content []byte
		fields  map[string]string
		code    string
		message string
	}{
		{"header without rows", sheetBytes(t, func(f *excelize.File) { f.SetSheetRow("Sheet1", "A1", header) }), nil, //nolint:errcheck
			"no_rows", "no data rows"},
		{"missing columns", sheetBytes(t, func(f *excelize.File) {
			f.SetSheetRow("Sheet1", "A1", &[]any{"code", "email"})     //nolint:errcheck
			f.SetSheetRow("Sheet1", "A2", &[]any{"C1", "a@b.example"}) //nolint:errcheck
		}), nil, "missing_columns", "missing required column(s): name (客户名称), phone (手机号)"},
		{"no header at all", sheetBytes(t, func(f *excelize.File) {
			f.SetSheetRow("Sheet1", "A1", &[]any{"C1", "n", "13800138000"}) //nolint:errcheck
		}), nil, "missing_header", "no header row found"},
	}
	for _, c := range failures {
		t.Run(c.name, func(t *testing.T) {
			task := p.submitImport(aliceToken, "f.xlsx", c.content, c.fields)
			final := p.waitStatus(aliceToken, task.ID, 30*time.Second, "FAILED", "SUCCESS", "PARTIAL_SUCCESS")
			if final.Status != "FAILED" || final.Error == nil || final.Error.Code != c.code || !strings.Contains(final.Error.Message, c.message) || final.Retry != 0 {
				t.Fatalf("final = %s %+v (retries %d), want FAILED %s %q without retries", final.Status, final.Error, final.Retry, c.code, c.message)
			}
		})
	}
	// A task that failed on its input is a done job for the queue: nothing archived, no
	// "Retry exhausted" warning, and the metric names the cause, so no alert fires on it.
	testenv.Eventually(t, 30*time.Second, "the queue to finish the failed imports' jobs", func() bool {
		for _, lane := range jobs.Lanes("imports") {
			if info, err := e.inspector().GetQueueInfo(lane); err == nil && info.Active > 0 {
				return false
			}
		}
		return true
	})
	for _, lane := range jobs.Lanes("imports") {
		if info, err := e.inspector().GetQueueInfo(lane); err == nil && info.Archived != 0 {
			t.Errorf("queue %s archived %d jobs of tasks that failed on their input", lane, info.Archived)
		}
	}
	if warned := p.logs.matching("Retry exhausted"); len(warned) != 0 {
		t.Errorf("asynq warned of exhausted retries for bad input:\n%s", strings.Join(warned, "\n"))
	}
	if got := scrape(t, p, `taskcenter_tasks_finished_total{cause="bad_input",status="FAILED",type="import:customers"}`); got != float64(len(failures)) {
		t.Errorf("finished with cause bad_input = %v, want %d", got, len(failures))
	}

	t.Run("the named sheet of several", func(t *testing.T) {
		task := p.submitImport(aliceToken, "two.xlsx", valid, map[string]string{"sheet": "Second"})
		p.waitStatus(aliceToken, task.ID, 30*time.Second, "SUCCESS")
		if n := e.count("SELECT count(*) FROM customers WHERE code = 'S1'"); n != 1 {
			t.Fatal("the second sheet was not imported")
		}
	})
	t.Run("formulas, merged cells and a 32k cell", func(t *testing.T) {
		content := sheetBytes(t, func(f *excelize.File) {
			f.SetSheetRow("Sheet1", "A1", &[]any{"code", "name", "phone", "city"}) //nolint:errcheck
			f.SetSheetRow("Sheet1", "A2", &[]any{"M1", "merged", "13800138000", "Shanghai"})
			f.SetSheetRow("Sheet1", "A3", &[]any{"M2", "", "13800138001"})
			f.MergeCell("Sheet1", "B2", "B3")                      //nolint:errcheck
			f.SetCellFormula("Sheet1", "C4", "13800138000+2")      //nolint:errcheck
			f.SetSheetRow("Sheet1", "A4", &[]any{"M3", "formula"}) //nolint:errcheck
			f.SetSheetRow("Sheet1", "A5", &[]any{"M4", strings.Repeat("x", 32767), "13800138003"})
		})
		task := p.submitImport(aliceToken, "merged.xlsx", content, nil)
		p.waitStatus(aliceToken, task.ID, 30*time.Second, "PARTIAL_SUCCESS")
		items := e.items(task.ID)
		if !strings.Contains(items[3], "name: is required") || !strings.Contains(items[4], "phone: is required") ||
			!strings.Contains(items[5], "has 32767") || len(items) != 3 {
			t.Fatalf("items = %v", items)
		}
	})
}

func TestImportWorkerKilledMidwayResumesWithExactCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, merge(fastCleanup, map[string]string{"TASKCENTER_IMPORT_BATCH_SIZE": "200"}))
	const rows = 20000
	// Every 97th row has a bad phone; every 101st row repeats the code of the row above it.
	content := sheetBytes(t, func(f *excelize.File) {
		sw, _ := f.NewStreamWriter("Sheet1")
		sw.SetRow("A1", []any{"code", "name", "phone", "email"}) //nolint:errcheck
		for i := 2; i <= rows+1; i++ {
			code, phone := fmt.Sprintf("K%06d", i), fmt.Sprintf("139%08d", i)
			if i%97 == 0 {
				phone = "12345"
			}
			if i%101 == 0 {
				code = fmt.Sprintf("K%06d", i-1)
			}
			cell, _ := excelize.CoordinatesToCellName(1, i)
			sw.SetRow(cell, []any{code, fmt.Sprintf("name %d", i), phone, fmt.Sprintf("k%d@example.com", i)}) //nolint:errcheck
		}
		sw.Flush() //nolint:errcheck
	})
	var wantFailed int
	for i := 2; i <= rows+1; i++ {
		if i%97 == 0 || (i%101 == 0 && (i-1)%97 != 0) {
			wantFailed++
		}
	}
	api := e.start("api,scheduler")
	doomed := e.startBinary("worker")
	task := api.submitImport(aliceToken, "big.xlsx", content, nil)
	testenv.Eventually(t, 60*time.Second, "the import to be under way", func() bool {
		got := api.task(aliceToken, task.ID)
		return got.Status == "RUNNING" && got.Counts.Total > 0
	})
	doomed.signal(syscall.SIGKILL, 10*time.Second)
	killedAt := api.task(aliceToken, task.ID).Counts.Total
	e.start("worker")
	final := api.waitStatus(aliceToken, task.ID, 120*time.Second, "PARTIAL_SUCCESS", "SUCCESS", "FAILED")
	if final.Counts.Total != rows || final.Counts.Failed != int64(wantFailed) || final.Counts.Success != int64(rows-wantFailed) {
		t.Fatalf("counts %+v, want total %d failed %d (killed after %d rows)", final.Counts, rows, wantFailed, killedAt)
	}
	if killedAt >= rows {
		t.Fatalf("the worker finished before it was killed; the test proved nothing")
	}
	if n := e.count("SELECT count(*) FROM customers"); n != rows-wantFailed {
		t.Fatalf("customers = %d, want %d", n, rows-wantFailed)
	}
	if n := e.count("SELECT count(*) FROM task_items"); n != wantFailed {
		t.Fatalf("rejected rows recorded = %d, want %d (none twice)", n, wantFailed)
	}
	if !final.takenOverThenEnded(final.Status) {
		t.Fatalf("attempts = %+v, want the killed one superseded, a takeover, and only retries after a temporary database error", final.Attempts)
	}
	t.Logf("killed after %d of %d rows; resumed and finished with exact counts", killedAt, rows)
}

func TestImportCancelStopsBetweenBatchesAndRetryResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"TASKCENTER_IMPORT_BATCH_SIZE": "100"})
	const rows = 20000
	content := sheetBytes(t, func(f *excelize.File) {
		sw, _ := f.NewStreamWriter("Sheet1")
		sw.SetRow("A1", []any{"code", "name", "phone"}) //nolint:errcheck
		for i := 2; i <= rows+1; i++ {
			cell, _ := excelize.CoordinatesToCellName(1, i)
			sw.SetRow(cell, []any{fmt.Sprintf("Q%06d", i), "n", fmt.Sprintf("137%08d", i)}) //nolint:errcheck
		}
		sw.Flush() //nolint:errcheck
	})
	p := e.start("all")
	task := p.submitImport(aliceToken, "c.xlsx", content, nil)
	testenv.Eventually(t, 60*time.Second, "the import to be under way", func() bool {
		return p.task(aliceToken, task.ID).Counts.Total > 0
	})
	p.do("POST", "/api/v1/tasks/"+task.ID+"/cancel", aliceToken, nil)
	cancelled := p.waitStatus(aliceToken, task.ID, 30*time.Second, "CANCELLED", "SUCCESS")
	if cancelled.Status != "CANCELLED" || cancelled.Counts.Total%100 != 0 || cancelled.Counts.Total >= rows {
		t.Fatalf("cancelled = %s with %d rows done; want a whole number of batches", cancelled.Status, cancelled.Counts.Total)
	}
	if n := e.count("SELECT count(*) FROM customers"); int64(n) != cancelled.Counts.Success {
		t.Fatalf("customers %d != success count %d", n, cancelled.Counts.Success)
	}
	p.do("POST", "/api/v1/tasks/"+task.ID+"/retry", aliceToken, nil)
	final := p.waitStatus(aliceToken, task.ID, 3*time.Minute, "SUCCESS", "PARTIAL_SUCCESS", "FAILED")
	if final.Status != "SUCCESS" || final.Counts.Total != rows || final.Counts.Success != rows {
		t.Fatalf("after retry: %s %+v", final.Status, final.Counts)
	}
	if n := e.count("SELECT count(*) FROM customers"); n != rows {
		t.Fatalf("customers = %d, want %d", n, rows)
	}
}

// As a new user would: the CSV Excel on a Chinese Windows saves (GBK) and the .xls
// LibreOffice saves import with the same counts and messages as the UTF-8 .xlsx.
func TestLegacyFormatsImportLikeTheXLSX(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, nil, "all")
	var want map[int]string
	for _, name := range []string{"messy-libreoffice.xlsx", "messy-gbk.csv", "messy-libreoffice.xls"} {
		final := p.importMessy(name, sheettest.Fixture(t, name))
		items := e.items(final.ID)
		if want == nil {
			want = items
			continue
		}
		if len(items) != len(want) {
			t.Errorf("%s: rejected %v, the .xlsx %v", name, items, want)
		}
		for row, m := range want {
			if items[row] != m {
				t.Errorf("%s row %d: %q, the .xlsx gives %q", name, row, items[row], m)
			}
		}
	}
	// A Latin-1 file and a random binary file are still refused, saying why.
	latin1 := []byte("code,name,phone\r\nC1,Jos\xe9,13800138000\r\n")
	res := p.upload(aliceToken, "latin1.csv", latin1, nil)
	if res.status != 422 || !strings.Contains(string(res.body), "unknown_encoding") || !strings.Contains(string(res.body), "tried GB18030/GBK") {
		t.Fatalf("Latin-1: %d %s", res.status, res.body)
	}
	random := bytes.Repeat([]byte{0x00, 0xFF, 0x13, 0x88}, 1000)
	if res := p.upload(aliceToken, "random.csv", random, nil); res.status != 415 || !strings.Contains(string(res.body), "binary file") {
		t.Fatalf("binary: %d %s", res.status, res.body)
	}
}

// The template downloaded in 中文, filled in by hand with two bad rows, imports as
// PARTIAL_SUCCESS with a Chinese error report and Chinese first_errors; ?lang=en gives the
// report in English.
func TestChineseTemplateRoundTrip(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, nil, "all")
	res := p.do("GET", "/api/v1/imports/template?lang=zh&format=xlsx", aliceToken, nil)
	if res.status != 200 || !strings.Contains(res.header.Get("Content-Disposition"), "customers-template-zh.xlsx") {
		t.Fatalf("template: %d %v", res.status, res.header)
	}
	f, err := excelize.OpenReader(bytes.NewReader(res.body))
	if err != nil {
		t.Fatal(err)
	}
	sheet := f.GetSheetName(0)
	f.SetSheetRow(sheet, "A2", &[]any{"T001", "北京甲公司", "13900139000", "", "北京", "黄金"})              //nolint:errcheck
	f.SetSheetRow(sheet, "A3", &[]any{"T002", "上海乙公司", "139001390", "", "上海", "白银"})                //nolint:errcheck
	f.SetSheetRow(sheet, "A4", &[]any{"T003", "", "13900139002", "", "", "普通"})                     //nolint:errcheck
	f.SetSheetRow(sheet, "A5", &[]any{"T004", "广州丙公司", "13900139003", "c@example.com", "广州", "钻石"}) //nolint:errcheck
	var filled bytes.Buffer
	f.WriteTo(&filled) //nolint:errcheck
	up := p.upload(aliceToken, "客户.xlsx", filled.Bytes(), nil, "Accept-Language", "zh-CN,zh;q=0.9,en;q=0.8")
	if up.status != 202 {
		t.Fatalf("upload: %d %s", up.status, up.body)
	}
	var out struct{ Task taskJSON }
	up.json(t, &out)
	final := p.waitStatus(aliceToken, out.Task.ID, 3*time.Minute, "PARTIAL_SUCCESS", "SUCCESS", "FAILED")
	if final.Status != "PARTIAL_SUCCESS" || final.Counts.Success != 2 || final.Counts.Failed != 2 {
		t.Fatalf("%s %+v %+v", final.Status, final.Counts, final.Error)
	}
	if fe := final.Result.FirstErrors; len(fe) != 2 || fe[0] != "第 3 行，手机号：必须是以 1 开头的 11 位数字" || fe[1] != "第 4 行，客户名称：必填" {
		t.Fatalf("first_errors = %q", fe)
	}
	rep := p.do("GET", "/api/v1/tasks/"+out.Task.ID+"/error-report", aliceToken, nil)
	rows := readReport(t, rep.body)
	if rep.status != 200 || len(rows) != 3 || rows[0][0] != "行号" || rows[0][2] != "原因" || rows[1][2] != "手机号：必须是以 1 开头的 11 位数字" || rows[2][1] != "客户名称" {
		t.Fatalf("Chinese report: %d %q", rep.status, rows)
	}
	en := p.do("GET", "/api/v1/tasks/"+out.Task.ID+"/error-report?lang=en", aliceToken, nil)
	rows = readReport(t, en.body)
	if en.status != 200 || rows[0][0] != "row" || rows[1][2] != "phone: must be 11 digits starting with 1" || rows[1][3] != "T002" {
		t.Fatalf("English report: %d %q", en.status, rows)
	}
	csv := p.do("GET", "/api/v1/imports/template?lang=en&format=csv", aliceToken, nil)
	if csv.status != 200 || !strings.HasPrefix(string(csv.body), "\uFEFFcode,name,phone,email,city,level\r\n") {
		t.Fatalf("CSV template: %d %q", csv.status, csv.body)
	}
	if bad := p.do("GET", "/api/v1/imports/template?format=pdf", aliceToken, nil); bad.status != 400 {
		t.Fatalf("format=pdf: %d", bad.status)
	}
}
