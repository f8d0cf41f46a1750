package sheet

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// excelizeRows reads a sheet with excelize's own iterator, raw values: the reference.
func excelizeRows(t *testing.T, p, sheet string) map[int][]string {
	t.Helper()
	f, err := excelize.OpenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if sheet == "" {
		sheet = f.GetSheetList()[0]
	}
	rows, err := f.Rows(sheet)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]string{}
	n := 0
	for rows.Next() {
		n++
		cells, err := rows.Columns(excelize.Options{RawCellValue: true})
		if err != nil {
			t.Fatal(err)
		}
		if c := trimTrailing(cells); len(c) > 0 {
			out[n] = c
		}
	}
	return out
}

func ourRows(t *testing.T, p, sheet string) map[int][]string {
	t.Helper()
	ins, err := inspectPath(p, XLSX, sheet, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := openXLSX(p, ins.Sheet, Limits{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := map[int][]string{}
	last := 0
	for src.Next() {
		n, cells := src.Row()
		if n != last+1 {
			t.Fatalf("row numbers jump from %d to %d", last, n)
		}
		last = n
		if c := trimTrailing(cells); len(c) > 0 {
			out[n] = c
		}
	}
	if err := src.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func trimTrailing(c []string) []string {
	for len(c) > 0 && c[len(c)-1] == "" {
		c = c[:len(c)-1]
	}
	return c
}

// Our reader must see exactly what excelize sees, on every producer's file.
func TestXLSXReaderMatchesExcelize(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../testdata/imports/*.xlsx")
	if len(files) < 4 {
		t.Fatalf("fixtures missing: %v", files)
	}
	// And files written here: gaps, rich text, booleans, a formula with and without a value,
	// shared strings (SetCellValue) and inline strings (the stream writer), two sheets.
	dir := t.TempDir()
	f := excelize.NewFile()
	f.SetSheetRow("Sheet1", "A1", &[]any{"code", "name", "phone"})                                                               //nolint:errcheck
	f.SetSheetRow("Sheet1", "A3", &[]any{"X1", "after a gap", 13800138000})                                                      //nolint:errcheck
	f.SetCellRichText("Sheet1", "B4", []excelize.RichTextRun{{Text: "rich "}, {Text: "text", Font: &excelize.Font{Bold: true}}}) //nolint:errcheck
	f.SetCellBool("Sheet1", "C4", true)                                                                                          //nolint:errcheck
	f.SetCellFormula("Sheet1", "D4", "1+1")                                                                                      //nolint:errcheck
	f.SetCellValue("Sheet1", "E9", "far away &<>\" 'quoted'")                                                                    //nolint:errcheck
	f.SetCellValue("Sheet1", "AA10", 1.5)                                                                                        //nolint:errcheck
	f.NewSheet("Other")                                                                                                          //nolint:errcheck
	f.SetCellValue("Other", "A1", "other sheet")                                                                                 //nolint:errcheck
	made := filepath.Join(dir, "made.xlsx")
	if err := f.SaveAs(made); err != nil {
		t.Fatal(err)
	}
	g := excelize.NewFile()
	sw, _ := g.NewStreamWriter("Sheet1")
	for i := 1; i <= 3000; i += 1 + i%3 {
		cell, _ := excelize.CoordinatesToCellName(1+i%4, i)
		sw.SetRow(cell, []any{fmt.Sprintf("s%d", i), i, i%2 == 0, "  spaced  "}) //nolint:errcheck
	}
	sw.Flush() //nolint:errcheck
	streamed := filepath.Join(dir, "streamed.xlsx")
	if err := g.SaveAs(streamed); err != nil {
		t.Fatal(err)
	}
	files = append(files, made, streamed)
	for _, p := range files {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			want, got := excelizeRows(t, p, ""), ourRows(t, p, "")
			if len(want) != len(got) {
				t.Errorf("%d non-empty rows, excelize sees %d", len(got), len(want))
			}
			for n, w := range want {
				if !slices.Equal(w, got[n]) {
					t.Errorf("row %d: %q, excelize reads %q", n, got[n], w)
				}
			}
		})
	}
}

// craft writes a minimal workbook whose sheet XML (and shared strings) are given verbatim.
func craft(t *testing.T, sheetData, sst string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	put := func(name, body string) {
		w, _ := zw.Create(name)
		w.Write([]byte(body)) //nolint:errcheck
	}
	put("[Content_Types].xml", `<Types/>`)
	put("xl/workbook.xml", `<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" r:id="rId1"/></sheets></workbook>`)
	put("xl/_rels/workbook.xml.rels", `<Relationships><Relationship Id="rId1" Target="worksheets/sheet1.xml"/></Relationships>`)
	put("xl/worksheets/sheet1.xml", `<worksheet><sheetData>`+sheetData)
	if sst != "" {
		put("xl/sharedStrings.xml", sst)
	}
	zw.Close()
	p := filepath.Join(t.TempDir(), "crafted.xlsx")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readAll(p string) (int, error) {
	src, err := openXLSX(p, "S", Limits{}, os.TempDir())
	if err != nil {
		return 0, err
	}
	defer src.Close()
	n := 0
	for src.Next() {
		n++
	}
	return n, src.Err()
}

func TestXLSXReaderReportsDamageWithTheRow(t *testing.T) {
	t.Parallel()
	ok := craft(t, `<row r="1"><c t="s"><v>0</v></c></row><row r="3"><c t="s"><v>1</v></c></row></sheetData></worksheet>`,
		`<sst><si><t>a</t></si><si><r><t>b</t></r><r><t>c</t></r><rPh><t>phonetic</t></rPh></si></sst>`)
	if n, err := readAll(ok); err != nil || n != 3 {
		t.Fatalf("well-formed: %d rows, %v", n, err)
	}
	for name, c := range map[string]struct{ sheet, sst, want string }{
		"truncated mid-row":       {`<row r="1"><c><v>1</v></c></row><row r="2"><c><v>2`, "", "near row 2"},
		"missing shared string":   {`<row r="1"><c t="s"><v>7</v></c></row></sheetData></worksheet>`, `<sst><si><t>a</t></si></sst>`, "shared string 7 does not exist"},
		"rows out of order":       {`<row r="5"></row><row r="2"></row></sheetData></worksheet>`, "", "row 2 comes after row 5"},
		"bad cell reference":      {`<row r="1"><c r="1A"><v>1</v></c></row></sheetData></worksheet>`, "", "bad cell reference"},
		"cells out of order":      {`<row r="1"><c r="B1"><v>1</v></c><c r="A1"><v>2</v></c></row></sheetData></worksheet>`, "", "cell A1 comes after column B"},
		"a row that never closes": {`<row r="1"><c r="A1"><v>1</v></c></rov><row r="2"><c r="A2"><v>2</v></c></row></sheetData></worksheet>`, "", "near row 1 (cell A2 comes after column A)"},
		"no shared strings table": {`<row r="1"><c t="s"><v>0</v></c></row></sheetData></worksheet>`, "", "the workbook has none"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := readAll(craft(t, c.sheet, c.sst))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}
