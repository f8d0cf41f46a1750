package export

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe/xlsxtest"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/jobstest"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// An export read in several pages declares the range of every row it wrote: a reader that
// trusts the dimension (openpyxl read-only) sees the whole export, not its first cell.
func TestExportDeclaresItsRange(t *testing.T) {
	t.Parallel()
	w := jobstest.New(t, storage.Config{})
	const customers = 2_500
	storetest.Exec(t, w.PG.DB, `INSERT INTO customers (code, name, phone, email, city, level)
		SELECT 'C' || i, 'name ' || i, '13800138000', 'c' || i || '@example.com', 'Shanghai', 'gold'
		FROM generate_series(1, ?) AS i`, customers)

	h := NewCustomers(w.PG.DB, w.Files, Config{PageSize: 1000, ResultTTL: time.Hour, MaxRows: 10_000})
	var res ResultData
	if done := w.RunExport(t, h, "alice", CustomerParams{}, &res); res.Rows != customers {
		t.Fatalf("export of %d rows: %s", customers, done.Result)
	}
	// Eight columns; the header and a row per customer.
	if got, want := xlsxtest.SheetRanges(t, w.Path(res.File)), []string{"A1:H2501=A1:H2501"}; !slices.Equal(got, want) {
		t.Fatalf("declared=used %q, want %q", got, want)
	}
}

// An exported file speaks the language it was asked in: its sheet name, headers and the
// values a person reads (statuses, task types, customer levels) are Chinese for zh, and the
// column names and raw values programs match for en.
func TestExportsAreWrittenInTheirLanguage(t *testing.T) {
	t.Parallel()
	w := jobstest.New(t, storage.Config{})
	storetest.Exec(t, w.PG.DB, `INSERT INTO customers (code, name, phone, email, city, level)
		VALUES ('C1', '甲公司', '13800138000', 'c1@example.com', '上海', 'gold')`)
	title := msg.New("title.import", "filename", "客户.xlsx", "mode", "", "dry_run", "")
	waiting := w.Create(t, store.NewTask{Type: "import:customers", Owner: "alice", Queue: "imports", MaxRetry: 1, TimeoutSeconds: 600,
		Params: json.RawMessage(`{}`), Title: title.English(), TitleMessage: &title})
	cfg := Config{PageSize: 100, ResultTTL: time.Hour, MaxRows: 1000}
	export := func(t *testing.T, h jobs.Handler, params any) [][]string {
		t.Helper()
		var res ResultData
		w.RunExport(t, h, "bob", params, &res)
		f, err := excelize.OpenFile(w.Path(res.File))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sheets := f.GetSheetList()
		rows, err := f.GetRows(sheets[0])
		if err != nil {
			t.Fatal(err)
		}
		return append([][]string{sheets}, rows...)
	}
	tasks, customers := NewTasks(w.PG.DB, w.Files, cfg), NewCustomers(w.PG.DB, w.Files, cfg)
	only := func(rows [][]string, id string) []string {
		for _, r := range rows {
			if len(r) > 0 && r[0] == id {
				return r
			}
		}
		t.Fatalf("no row for %s in %q", id, rows)
		return nil
	}
	for _, tc := range []struct {
		lang                            string
		sheet                           string
		taskHeader, customerHeader      []string
		status, taskType, customerLevel string
		titleHeader, title              string
	}{
		{"zh", "数据", []string{"任务编号", "类型", "所有者", "状态"}, []string{"客户编号", "客户名称", "手机号"}, "排队中", "客户导入", "黄金", "标题", "导入 客户.xlsx"},
		{"en", "Sheet1", []string{"task_no", "type", "owner", "status"}, []string{"code", "name", "phone"}, "PENDING", "import:customers", "gold", "title", "Import 客户.xlsx"},
		{"", "Sheet1", []string{"task_no", "type", "owner", "status"}, []string{"code", "name", "phone"}, "PENDING", "import:customers", "gold", "title", "Import 客户.xlsx"},
	} {
		t.Run("lang "+tc.lang, func(t *testing.T) {
			got := export(t, tasks, TaskParams{Scope: store.Scope{Admin: true}, Lang: tc.lang})
			if got[0][0] != tc.sheet || !slices.Equal(got[1][:4], tc.taskHeader) {
				t.Fatalf("task export: sheet %q, header %q; want %q, %q", got[0][0], got[1], tc.sheet, tc.taskHeader)
			}
			if row := only(got, waiting.TaskNo); row[1] != tc.taskType || row[3] != tc.status {
				t.Fatalf("task row %q: want type %q, status %q", row, tc.taskType, tc.status)
			}
			// The title is the last column (positions programs read stay where they were), in
			// the file's language.
			if header, row := got[1], only(got, waiting.TaskNo); header[len(header)-1] != tc.titleHeader || len(row) != len(header) || row[len(row)-1] != tc.title {
				t.Fatalf("task export: header %q, row %q; want the title %q under %q", header, row, tc.title, tc.titleHeader)
			}
			got = export(t, customers, CustomerParams{Lang: tc.lang})
			if got[0][0] != tc.sheet || !slices.Equal(got[1][:3], tc.customerHeader) {
				t.Fatalf("customer export: sheet %q, header %q; want %q, %q", got[0][0], got[1], tc.sheet, tc.customerHeader)
			}
			if row := only(got, "C1"); row[5] != tc.customerLevel {
				t.Fatalf("customer row %q: want level %q", row, tc.customerLevel)
			}
		})
	}
}
