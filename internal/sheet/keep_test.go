package sheet

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
)

// readKept reads every row of the workbook at p through a Reader keeping keep columns
// (0: all) from row 2 on, as the import asks once it has mapped the header.
func readKept(t testing.TB, p string, format Format, keep int) (map[int][]string, map[int][]int, error) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := f.Stat()
	file := &osFile{f, info.Size()}
	ins := Inspection{Format: format, Sheet: "S", Encoding: EncodingUTF8}
	rd, err := Open(file, ins, Limits{}, t.TempDir())
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	defer rd.Close()
	rows, longs := map[int][]string{}, map[int][]int{}
	for rd.Next() {
		n, cells := rd.Row()
		if n == 1 {
			rd.KeepColumns(keep)
		}
		if len(cells) > 0 {
			rows[n] = cells
		}
		if l := rd.Long(); len(l) > 0 {
			longs[n] = l
		}
	}
	return rows, longs, rd.Err()
}

type osFile struct {
	*os.File
	size int64
}

func (f *osFile) Size() int64 { return f.size }

// Cells past the columns kept are skipped, not decoded: a bad shared string index, a bad
// entity, a cell beyond column XFD or a cell over the cell limit there neither fails the
// file nor reaches the row, and the kept columns read exactly as they do without the limit.
func TestKeepColumnsSkipsCellsPastThemUndecoded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 40_000)
	valid := `<row r="2"><c r="A2" t="s"><v>0</v></c><c r="B2" t="inlineStr"><is><t>a &amp; b</t></is></c><c r="C2"><v>13800138000</v></c>` +
		`<c r="D2" t="s"><v>1</v></c><c r="E2" t="inlineStr"><is><t>` + long + `</t></is></c></row>` +
		`<row r="3"><c r="A3" t="inlineStr"><is><t>C2</t></is></c><c r="C3"><v>13800138001</v></c><c r="F3"><v>7</v></c></row>`
	hostile := `<row r="4"><c r="A4" t="inlineStr"><is><t>C3</t></is></c><c r="B4" t="s"><v>1</v></c><c r="C4"><v>13800138002</v></c>` +
		`<c r="D4" t="s"><v>999999</v></c><c r="E4"><v>&bogus;</v></c><c r="F4" t="inlineStr"><is><t>` + long + `</t></is></c>` +
		`<c r="XFE4"><v>1</v></c></row>` +
		`<row r="5"><c r="A5" t="inlineStr"><is><t>C4</t></is></c><c r="C5"><v>1</v></c><c r="D5" t="s"><v>x</v></c><c r="B5"><v>out of order</v></c></row>`
	sst := []sheettest.Piece{sheettest.Text(`<sst><si><t>C1</t></si><si><t>名字</t></si></sst>`)}
	validBook := book(t, sheetXML(sheettest.Text(headerRow), sheettest.Text(valid)), sst)
	hostileBook := book(t, sheetXML(sheettest.Text(headerRow), sheettest.Text(valid+hostile)), sst)

	all, allLongs, err := readKept(t, validBook, XLSX, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all[2]) != 5 || !slices.Equal(allLongs[2], []int{4}) || len(all[3]) != 6 {
		t.Fatalf("read whole: %v, cut %v", all, allLongs)
	}
	kept, keptLongs, err := readKept(t, validBook, XLSX, 3)
	if err != nil {
		t.Fatal(err)
	}
	for n, cells := range all {
		if want := cells[:min(len(cells), 3)]; !slices.Equal(kept[n], want) {
			t.Errorf("row %d: kept %q, want the first three of %q", n, kept[n], cells)
		}
	}
	if len(keptLongs) != 0 {
		t.Errorf("cut columns past the kept ones reported: %v", keptLongs)
	}

	if _, _, err := readKept(t, hostileBook, XLSX, 0); err == nil {
		t.Fatal("the hostile cells read whole do not fail: the test proves nothing")
	}
	rows, longs, err := readKept(t, hostileBook, XLSX, 3)
	if err != nil {
		t.Fatalf("hostile cells past the kept columns failed the file: %v", err)
	}
	want := map[int][]string{1: {"code", "name", "phone"}, 2: {"C1", "a & b", "13800138000"}, 3: {"C2", "", "13800138001"},
		4: {"C3", "名字", "13800138002"}, 5: {"C4", "", "1"}}
	for n, cells := range want {
		if !slices.Equal(rows[n], cells) {
			t.Errorf("row %d: %q, want %q", n, rows[n], cells)
		}
	}
	if len(rows) != len(want) || len(longs) != 0 {
		t.Errorf("rows %v, cut columns %v", rows, longs)
	}
}

// The rows of a CSV keep their fields up to the limit and their line numbers, whatever the
// fields past it hold (a quoted field over several lines among them).
func TestKeepColumnsCSV(t *testing.T) {
	t.Parallel()
	p := writeTemp(t, "wide.csv", []byte("code,name,phone,note\nC1,n,138,\"two\nlines\",x\nC2,m,139,"+strings.Repeat("y", 40_000)+"\n"))
	rows, longs, err := readKept(t, p, CSV, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{1: {"code", "name", "phone", "note"}, 2: {"C1", "n"}, 4: {"C2", "m"}}
	if fmt.Sprint(rows) != fmt.Sprint(want) || len(longs) != 0 {
		t.Fatalf("rows %v, cut columns %v; want %v", rows, longs, want)
	}
}
