package importer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
	"github.com/taskcenter/taskcenter/store"
)

// submitAs goes through the real submit side (receive, accept) and creates the task.
func (w *world) submitAs(name string, content []byte, o Submit) (*store.Task, jobs2Sub, error) {
	w.t.Helper()
	up := NewUploads(UploadsDeps{Store: w.st, Files: w.fs})
	r, err := up.receive(context.Background(), name, bytes.NewReader(content), 64<<20)
	if err != nil {
		return nil, jobs2Sub{}, err
	}
	o.Mode = cmp.Or(o.Mode, ModeUpsert)
	sub, err := up.accept(context.Background(), r, "alice", o)
	if err != nil {
		return nil, jobs2Sub{}, err
	}
	return w.create(w.t, sub), jobs2Sub{key: sub.BizKey, params: sub.Params}, nil
}

type jobs2Sub struct {
	key    string
	params json.RawMessage
}

// outcome is what an import did: counts and each rejected row's fields and message.
type outcome struct {
	status                 store.Status
	total, success, failed int64
	items                  map[int]string
}

func (w *world) outcome(task *store.Task) outcome {
	w.t.Helper()
	items, err := w.st.Items(context.Background(), task.ID, -1, 1000)
	if err != nil {
		w.t.Fatal(err)
	}
	o := outcome{status: task.Status, total: task.TotalCount, success: task.SuccessCount, failed: task.FailedCount, items: map[int]string{}}
	for _, it := range items {
		o.items[it.Row] = it.Field + " | " + it.Message
	}
	return o
}

// The GBK CSV (what Excel on a Chinese Windows saves as "CSV (逗号分隔)") imports exactly as
// the UTF-8 one; the .xls LibreOffice saves imports exactly as the .xlsx it saves.
func TestLegacyFilesImportLikeTheirModernTwins(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ legacy, modern, enc string }{
		{"messy-gbk.csv", "messy-bom.csv", "gb18030"},
		{"messy-libreoffice.xls", "messy-libreoffice.xlsx", ""},
	} {
		t.Run(c.legacy, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, Config{BatchSize: 4})
			modern, _, err := w.submitAs(c.modern, sheettest.Fixture(t, c.modern), Submit{})
			if err != nil {
				t.Fatal(err)
			}
			want := w.outcome(w.deliver(modern))
			if want.status != store.StatusPartialSuccess || want.total != 15 || want.success != 8 || want.failed != 7 {
				t.Fatalf("%s: %+v", c.modern, want)
			}
			w.pg.DB.ExecContext(context.Background(), "DELETE FROM customers") //nolint:errcheck
			legacy, sub, err := w.submitAs(c.legacy, sheettest.Fixture(t, c.legacy), Submit{})
			if err != nil {
				t.Fatal(err)
			}
			if c.enc != "" && (!strings.HasSuffix(sub.key, ":"+c.enc) || !strings.Contains(string(sub.params), `"encoding":"`+c.enc+`"`)) {
				t.Fatalf("key %s params %s: the encoding is not recorded", sub.key, sub.params)
			}
			got := w.outcome(w.deliver(legacy))
			if got.status != want.status || got.total != want.total || got.success != want.success || got.failed != want.failed {
				t.Fatalf("%s: %+v, %s gives %+v", c.legacy, got, c.modern, want)
			}
			for row, m := range want.items {
				if got.items[row] != m {
					t.Errorf("row %d: %q, %s says %q", row, got.items[row], c.modern, m)
				}
			}
			// Only the modern file's rows were deleted: the second import wrote the same rows.
			if n := w.count("SELECT count(*) FROM customers"); n != 8 {
				t.Fatalf("customers = %d, want 8", n)
			}
		})
	}
}

// Every row message the import writes has a Chinese wording, and the English stays the
// canonical stored text.
func TestEveryRowMessageReadsInChinese(t *testing.T) {
	t.Parallel()
	cols, _, err := mapHeader([]string{"code", "name", "phone", "email", "city", "level"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 70)
	rows := [][]string{
		{"", "", "", "", "", ""},
		{"bad code!", strings.Repeat("名", 101), "12345", "not-an-email", long, "bronze"},
		{"C1", "n", "1.38E+10", "", "", ""},
		{"C1", "n", "13800138000", "a@b.example", "", "gold"},
	}
	var msgs []string
	for i, r := range rows {
		if _, errs := cols.validate(i+2, r, nil); len(errs) > 0 {
			_, m := rowMessage(errs)
			msgs = append(msgs, m)
		}
	}
	cut := []string{strings.Repeat("y", 40), strings.Repeat("y", 40), strings.Repeat("y", 40), strings.Repeat("y", 40), strings.Repeat("y", 40), strings.Repeat("y", 40)}
	if _, errs := cols.validate(9, cut, []int{0, 1, 2, 3, 4, 5}); len(errs) > 0 {
		_, m := rowMessage(errs)
		msgs = append(msgs, m)
	}
	msgs = append(msgs, "code: "+msgDuplicate.text("C002", "3"), "code: "+msgExists.text("C9"))
	english := []string{"must", "is required", "valid", "rounded", "already", "this one"}
	for _, m := range msgs {
		zh := renderParts(ParseMessage(m), LangZH)
		for _, e := range english {
			if strings.Contains(zh, e) {
				t.Errorf("%q reads %q in Chinese: %q is not translated", m, zh, e)
			}
		}
		if renderParts(ParseMessage(m), LangEN) != m {
			t.Errorf("the English of %q changed", m)
		}
	}
	if got := ParseRowError("row 6, phone: must be 11 digits starting with 1; email: is not a valid email address").In(LangZH); got != "第 6 行，手机号：必须是以 1 开头的 11 位数字；邮箱：不是有效的邮箱地址" {
		t.Fatalf("row error in Chinese: %q", got)
	}
	if got := renderParts(ParseMessage("phone: 1.38E+10 is a rounded number; format the column as text and enter all 11 digits; name: is required"), LangZH); got != "手机号：1.38E+10 是被四舍五入的数字；请把该列设为文本格式，并填写完整的 11 位号码；客户名称：必填" {
		t.Fatalf("a message holding '; ': %q", got)
	}
	if got := renderParts(ParseMessage("name: something new"), LangZH); got != "客户名称：something new" {
		t.Fatalf("an unknown message: %q", got)
	}
	for in, want := range map[string]Lang{"zh-CN,zh;q=0.9,en;q=0.8": LangZH, "en-US,en;q=0.9,zh;q=0.8": LangEN, "": LangEN, "fr": LangEN, "zh": LangZH, "en;q=0.5,zh-TW;q=0.7": LangZH} {
		if got := ParseLang(in); got != want {
			t.Errorf("ParseLang(%q) = %s, want %s", in, got, want)
		}
	}
}

// A reason of the breakdown says its rows' values when they share them, and the message
// without values when they differ (the breakdown drops the params).
func TestAReasonIsSaidWithTheValuesItsRowsShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code   string
		params msg.Params
		lang   Lang
		want   string
	}{
		{"row.duplicate", msg.Params{"value": "K1", "row": "2"}, LangZH, "K1 已在第 2 行出现"},
		{"row.duplicate", nil, LangZH, "已在前面的行出现"},
		{"row.duplicate", nil, LangEN, "already appears in an earlier row"},
		{"row.too_long", msg.Params{"max": "100"}, LangEN, "is too long"},
		{"row.phone", nil, LangZH, "必须是以 1 开头的 11 位数字"},
	} {
		if got := reasonIn(tc.code, tc.params, tc.lang); got != tc.want {
			t.Errorf("reasonIn(%s, %v, %s) = %q, want %q", tc.code, tc.params, tc.lang, got, tc.want)
		}
	}
}

// The Chinese template, filled in by hand with two bad rows, imports as PARTIAL_SUCCESS with
// a Chinese error report.
func TestTheChineseTemplateFilledInImports(t *testing.T) {
	t.Parallel()
	b, name, err := Template(LangZH, sheet.XLSX)
	if err != nil || name != "customers-template-zh.xlsx" {
		t.Fatal(name, err)
	}
	f, err := excelize.OpenReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	sheetName := f.GetSheetName(0)
	rows, _ := f.GetRows(sheetName)
	if sheetName != "客户" || !slices.Equal(rows[0], []string{"客户编号", "客户名称", "手机号", "邮箱", "城市", "等级"}) || len(rows) != 2 {
		t.Fatalf("template %s: %q", sheetName, rows)
	}
	dvs, err := f.GetDataValidations(sheetName)
	if err != nil || len(dvs) != 1 || !strings.Contains(dvs[0].Formula1, "普通,白银,黄金,铂金,钻石") || !strings.HasPrefix(dvs[0].Sqref, "F2:") {
		t.Fatalf("level drop-down: %+v, %v", dvs, err)
	}
	panes, _ := f.GetPanes(sheetName)
	if !panes.Freeze || panes.YSplit != 1 {
		t.Fatalf("header not frozen: %+v", panes)
	}
	if w, _ := f.GetColWidth(sheetName, "B"); w < 20 {
		t.Fatalf("name column width %v", w)
	}
	// Filled in: the example row replaced, three rows of which two are bad.
	f.SetSheetRow(sheetName, "A2", &[]any{"K001", "北京甲公司", "13900139000", "", "北京", "黄金"}) //nolint:errcheck
	f.SetSheetRow(sheetName, "A3", &[]any{"K002", "上海乙公司", "1390013900", "", "上海", "白银"})  //nolint:errcheck
	f.SetSheetRow(sheetName, "A4", &[]any{"K003", "", "13900139002", "bad@", "", "青铜"})    //nolint:errcheck
	var filled bytes.Buffer
	f.WriteTo(&filled) //nolint:errcheck
	w := newWorld(t, Config{BatchSize: 100})
	task, _, err := w.submitAs("客户.xlsx", filled.Bytes(), Submit{Lang: "zh-CN,zh;q=0.9"})
	if err != nil {
		t.Fatal(err)
	}
	task = w.deliver(task)
	if task.Status != store.StatusPartialSuccess || task.SuccessCount != 1 || task.FailedCount != 2 {
		t.Fatalf("%s %d/%d", task.Status, task.SuccessCount, task.FailedCount)
	}
	var res ResultData
	json.Unmarshal(task.Result, &res) //nolint:errcheck
	if res.ErrorReportLang != LangZH || !strings.HasPrefix(res.FirstErrors[0], "row 3, phone: must be") {
		t.Fatalf("result %+v: first_errors stay canonical, the report is Chinese", res)
	}
	rep, err := excelize.OpenFile(w.jw.Path(res.ErrorReport))
	if err != nil {
		t.Fatal(err)
	}
	// The rows carry their problems as catalogue codes, one per field at fault, beside the
	// English made from them.
	items, err := w.st.Items(context.Background(), task.ID, 0, 10)
	if err != nil || len(items) != 2 {
		t.Fatalf("rejected rows %+v, %v", items, err)
	}
	if m := items[1].Messages; len(m) != 3 || m[0].Field != "name" || m[0].Code != "row.required" || m[0].Params != nil ||
		m[1].Code != "row.email" || m[2].Field != "level" || m[2].Code != "row.level" || items[1].Field != "name,email,level" ||
		items[1].Message != "name: is required; email: is not a valid email address; level: "+msgLevel.text() {
		t.Fatalf("row 4 stored as %+v", items[1])
	}
	if res.FirstErrorMessages[0].Row != 3 || res.FirstErrorMessages[0].Parts[0].Code != "row.phone" {
		t.Fatalf("first error messages %+v", res.FirstErrorMessages)
	}
	// The first sheet counts the rejected rows by field and reason, most first (ties by the
	// field's name in the file's header); the rows follow on the second.
	if sheets := rep.GetSheetList(); !slices.Equal(sheets, []string{"汇总", "错误"}) {
		t.Fatalf("report sheets %q, want the summary first", sheets)
	}
	summary, _ := rep.GetRows("汇总")
	wantSummary := [][]string{{"字段", "原因", "被拒行数"}, {"邮箱", "不是有效的邮箱地址", "1"}, {"等级", msgLevel.in(LangZH), "1"},
		{"客户名称", "必填", "1"}, {"手机号", "必须是以 1 开头的 11 位数字", "1"}}
	if len(summary) != len(wantSummary) {
		t.Fatalf("summary %q, want %q", summary, wantSummary)
	}
	for i := range wantSummary {
		if !slices.Equal(summary[i], wantSummary[i]) {
			t.Fatalf("summary %q, want %q", summary, wantSummary)
		}
	}
	got, _ := rep.GetRows("错误")
	want := [][]string{
		{"行号", "字段", "原因", "客户编号", "客户名称", "手机号", "邮箱", "城市", "等级"},
		{"3", "手机号", "手机号：必须是以 1 开头的 11 位数字", "K002", "上海乙公司", "1390013900", "", "上海", "白银"},
		{"4", "客户名称,邮箱,等级", "客户名称：必填；邮箱：不是有效的邮箱地址；等级：" + msgLevel.in(LangZH), "K003", "", "13900139002", "bad@", "", "青铜"},
	}
	for i := range want {
		if i >= len(got) || !slices.Equal(got[i], want[i]) {
			t.Fatalf("report row %d: %q\nwant %q", i+1, got, want[i])
		}
	}
	// The same report in English, for a download with ?lang=en.
	p, done, err := ErrorReportIn(context.Background(), w.st, w.fs, task, LangEN)
	if err != nil {
		t.Fatal(err)
	}
	en, err := excelize.OpenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	enSummary, _ := en.GetRows(en.GetSheetName(0))
	enRows, _ := en.GetRows("errors")
	done()
	if len(enSummary) != 5 || !slices.Equal(enSummary[0], []string{"field", "reason", "rejected rows"}) ||
		!slices.Equal(enSummary[1], []string{"email", "is not a valid email address", "1"}) || !slices.Equal(enSummary[3], []string{"name", "is required", "1"}) {
		t.Fatalf("English summary: %q", enSummary)
	}
	if enRows[0][0] != "row" || enRows[1][2] != "phone: must be 11 digits starting with 1" || len(enRows) != 3 {
		t.Fatalf("English report: %q", enRows)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("the one-off report was left behind: %v", err)
	}
	// The CSV template reads as a header and the example row.
	c, _, err := Template(LangEN, sheet.CSV)
	if err != nil || !bytes.HasPrefix(c, []byte("\uFEFFcode,name,phone,email,city,level\r\nC0001,")) {
		t.Fatalf("CSV template: %q, %v", c, err)
	}
}
