package importer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/store"
)

// Cells far right of the columns an import uses (past the last mapped one and the columns
// an error report keeps) are skipped by the reader without being decoded: a damaged one
// there does not fail the file, and the customers come out as they would without it.
func TestCellsPastTheUsedColumnsAreNotRead(t *testing.T) {
	t.Parallel()
	var sheet strings.Builder
	sheet.WriteString(`<worksheet><sheetData>` + headerRow)
	for i := 2; i <= 4; i++ {
		// KN is column 300; XFE is past the last column a sheet may have.
		fmt.Fprintf(&sheet, `<row r="%d"><c t="inlineStr"><is><t>K%d</t></is></c><c t="inlineStr"><is><t>name %d</t></is></c><c><v>138%08d</v></c>`+
			`<c r="KN%d" t="s"><v>7</v></c><c r="KO%d"><v>&bogus;</v></c><c r="XFE%d"><v>1</v></c></row>`, i, i, i, i, i, i, i)
	}
	sheet.WriteString(`</sheetData></worksheet>`)
	w := newWorld(t, Config{BatchSize: 2})
	task := w.deliver(w.submit("wide.xlsx", workbookOf(t, sheet.String())))
	if task.Status != store.StatusSuccess {
		t.Fatalf("%s: %s", task.Status, task.ErrorMessage)
	}
	if n := w.count("SELECT count(*) FROM customers WHERE code IN ('K2', 'K3', 'K4') AND name = 'name ' || substr(code, 2) AND phone = '138' || lpad(substr(code, 2), 8, '0')"); n != 3 {
		t.Fatalf("%d of the 3 customers imported as the file holds them", n)
	}
}
