package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
)

// As a new user would: the CSV Excel on a Chinese Windows saves (GBK) and the .xls
// LibreOffice saves import with the same counts and messages as the UTF-8 .xlsx.
func TestLegacyFormatsImportLikeTheXLSX(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	p := e.start("all")
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
	e := newEnv(t, nil)
	p := e.start("all")
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
