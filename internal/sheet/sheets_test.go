package sheet

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/xuri/excelize/v2"
)

// With no sheet named, a workbook whose first sheet is notes imports the sheet with the
// header; two such sheets make the uploader choose.
func TestTheSheetWithTheHeaderIsChosen(t *testing.T) {
	t.Parallel()
	book := func(sheets ...string) string {
		f := excelize.NewFile()
		for i, s := range sheets {
			name := fmt.Sprintf("S%d", i+1)
			if i == 0 {
				f.SetSheetName("Sheet1", name) //nolint:errcheck
			} else {
				f.NewSheet(name) //nolint:errcheck
			}
			if s == "notes" {
				f.SetSheetRow(name, "A1", &[]any{"说明：请在“客户”表中填写"}) //nolint:errcheck
				continue
			}
			f.SetSheetRow(name, "A1", &[]any{"客户编号", "客户名称", "手机号"})    //nolint:errcheck
			f.SetSheetRow(name, "A2", &[]any{"C1", "n", "13800138000"}) //nolint:errcheck
		}
		var b bytes.Buffer
		f.WriteTo(&b) //nolint:errcheck
		return writeTemp(t, "b.xlsx", b.Bytes())
	}
	for name, c := range map[string]struct {
		sheets []string
		want   string
		err    string
	}{
		"first has the header":        {[]string{"data", "data"}, "S1", ""},
		"notes first, one data sheet": {[]string{"notes", "notes", "data"}, "S3", ""},
		"notes first, two data":       {[]string{"notes", "data", "data"}, "", `several sheets do: "S2", "S3"`},
		"no data sheet at all":        {[]string{"notes", "notes"}, "S1", ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ins, err := inspectPath(book(c.sheets...), XLSX, "", Limits{})
			if c.err != "" {
				wantProblem(t, err, "ambiguous_sheet", c.err)
				return
			}
			if err != nil || ins.Sheet != c.want {
				t.Fatalf("sheet %q, %v; want %q", ins.Sheet, err, c.want)
			}
		})
	}
}
