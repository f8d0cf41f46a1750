package sheet

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
)

// With CountBytes, Inspect counts the rows in about that many bytes of the sheet: a longer
// file gets an estimate (not Counted) and is refused only when the part counted is over the
// row limit; a file within the bound is counted exactly, as without one. A GB18030 CSV is
// cut at the end of a line, never inside a character.
func TestInspectCountsWithinCountBytes(t *testing.T) {
	t.Parallel()
	var xml strings.Builder
	for i := 2; i <= 20_001; i++ {
		fmt.Fprintf(&xml, `<row r="%d"><c t="inlineStr"><is><t>C%d</t></is></c><c><v>13800000000</v></c></row>`, i, i)
	}
	workbook := sheettest.Zip(t, sheettest.BookParts(sheetXML(sheettest.Text(headerRow), sheettest.Text(xml.String())), nil)...)
	var utf8CSV, gbText strings.Builder
	utf8CSV.WriteString("code,name,phone\n")
	gbText.WriteString("客户编号,客户名称,手机号\n")
	for i := 1; i <= 20_000; i++ {
		fmt.Fprintf(&utf8CSV, "C%d,name %d,13800000000\n", i, i)
		fmt.Fprintf(&gbText, "C%d,客户 %d 号,13800000000\n", i, i)
	}
	gbCSV, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(gbText.String()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		format Format
		file   []byte
		enc    Encoding
	}{
		{"xlsx", XLSX, workbook, EncodingUTF8},
		{"utf-8 csv", CSV, []byte(utf8CSV.String()), EncodingUTF8},
		{"gb18030 csv", CSV, gbCSV, EncodingGB18030},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inspect := func(countBytes int64, lim Limits) (Inspection, error) {
				return Inspect(bytes.NewReader(c.file), int64(len(c.file)), Choice{Format: c.format},
					Options{Limits: lim, Count: CountAlways, IsHeader: testHeader, CountBytes: countBytes})
			}
			exact, err := inspect(0, Limits{})
			if err != nil || !exact.Counted || exact.Rows != 20_000 || exact.Encoding != c.enc && c.format == CSV {
				t.Fatalf("without a bound: %+v, %v", exact, err)
			}
			bounded, err := inspect(64<<10, Limits{})
			if err != nil || bounded.Counted || bounded.Rows < 15_000 || bounded.Rows > 25_000 || bounded.Encoding != c.enc && c.format == CSV {
				t.Fatalf("with a 64 KiB bound: %+v, %v; want about 20,000 rows, not counted", bounded, err)
			}
			if within, err := inspect(64<<20, Limits{}); err != nil || fmt.Sprint(within) != fmt.Sprint(exact) {
				t.Fatalf("with a bound past the file: %+v, %v; want %+v", within, err, exact)
			}
			if _, err := inspect(64<<10, Limits{MaxRows: 15_000}); err != nil {
				t.Fatalf("refused on an estimate: %v", err)
			}
			_, err = inspect(64<<10, Limits{MaxRows: 100})
			wantProblem(t, err, "too_many_rows", "over the limit of 100")
		})
	}
}
