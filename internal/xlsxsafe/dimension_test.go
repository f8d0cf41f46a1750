package xlsxsafe

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe/xlsxtest"
)

// checkRanges fails unless every worksheet declares the range of its cells, and those ranges
// are want (in any order).
func checkRanges(t *testing.T, path string, want ...string) {
	t.Helper()
	var got []string
	for _, r := range xlsxtest.SheetRanges(t, path) {
		declared, used, _ := strings.Cut(r, "=")
		if declared != used {
			t.Errorf("a sheet declares <dimension ref=%q>, its cells cover %s", declared, used)
		}
		got = append(got, declared)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the sheets declare %q, want %q", got, want)
	}
}

func newStore(t *testing.T) (storage.Store, string) {
	t.Helper()
	root := t.TempDir()
	fs, err := storage.New(t.Context(), storage.Config{}, root)
	if err != nil {
		t.Fatal(err)
	}
	return fs, root
}

// Sheets of every shape declare the range of their cells: rows narrower and wider than the
// header, trailing nil values (no cell written), a sheet that is only its header.
func TestWriterDeclaresEachSheetsRange(t *testing.T) {
	t.Parallel()
	fs, root := newStore(t)
	w, err := NewWriter(fs, "tsk_dim", "first", []string{"a", "b", "c", "d", "e", "f", "g", "h"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 1000 {
		row := []any{i, "=x", 1.5}
		switch i {
		case 500:
			row = []any{1, 2, 3, 4, 5, 6, 7, 8, 9, "ten"}
		case 999:
			row = []any{"last", nil, 3, nil, nil, nil, nil, nil, nil, nil, nil, nil}
		}
		if err := w.Row(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.NextSheet("header only", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if err := w.NextSheet("third", []string{"a", "b", "c", "d", "e"}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := w.Row([]any{i, i, i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(t.Context(), "results/dim.xlsx"); err != nil {
		t.Fatal(err)
	}
	checkRanges(t, filepath.Join(root, "results", "dim.xlsx"), "A1:J1001", "A1:B1", "A1:E21")
}

// A sheet large enough that excelize moves its stream to a temp file is copied into the zip
// in pieces, and still declares its range; so does a workbook finished by Flush.
func TestWriterDeclaresTheRangeOfALargeSheet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes a sheet of more than 16 MiB")
	}
	fs, _ := newStore(t)
	w, err := NewWriter(fs, "tsk_big", "Sheet1", []string{"code", "name", "phone", "email", "city", "level", "created", "updated"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const rows = 12_000 // of about 1.7 KiB each
	long := strings.Repeat("x", 200)
	for i := range rows {
		code := fmt.Sprintf("C%09d", i)
		if err := w.Row([]any{code, long, long, long, long, long, long, long}); err != nil {
			t.Fatal(err)
		}
	}
	path, err := w.Flush()
	if err != nil {
		t.Fatal(err)
	}
	checkRanges(t, path, fmt.Sprintf("A1:H%d", rows+1))
}

// A workbook built in memory declares the range of its cells, wherever they start.
func TestSetDimensionsMeasuresInMemorySheets(t *testing.T) {
	t.Parallel()
	f := excelize.NewFile()
	defer f.Close()
	SetDimensions(f)
	if _, err := f.NewSheet("two"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.NewSheet("empty"); err != nil {
		t.Fatal(err)
	}
	for cell, v := range map[string]string{"B3": "x", "D7": "y", "C2": "z"} {
		if err := f.SetCellStr("Sheet1", cell, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SetCellInt("two", "A1", 1); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "book.xlsx")
	if err := f.SaveAs(path); err != nil {
		t.Fatal(err)
	}
	checkRanges(t, path, "B2:D7", "A1", "A1")
}

// Only the ref changes, whichever form the element takes and however the bytes arrive.
func TestDimensionSetterChangesOnlyTheRef(t *testing.T) {
	t.Parallel()
	const tail = `<sheetViews/><sheetData><row r="1"><c r="A1"><v>1</v></c></row></sheetData></worksheet>`
	for in, want := range map[string]string{
		`<?xml version="1.0"?><worksheet><sheetPr/><dimension ref="A1"></dimension>` + tail: `<?xml version="1.0"?><worksheet><sheetPr/><dimension ref="A1:H9"></dimension>` + tail,
		`<worksheet><dimension ref="A1"/>` + tail:                                           `<worksheet><dimension ref="A1:H9"/>` + tail,
		`<worksheet><dimension  ref = 'B2:C3' />` + tail:                                    `<worksheet><dimension  ref = 'A1:H9' />` + tail,
		`<worksheet>` + tail: `<worksheet>` + tail,
		`<worksheet><dimensionX ref="A1"/><dimension xref="1" ref="A1"/>` + tail: `<worksheet><dimensionX ref="A1"/><dimension xref="1" ref="A1:H9"/>` + tail,
	} {
		for _, size := range []int{1, 3, len(in)} {
			var out bytes.Buffer
			d := &dimensionSetter{w: &out, ref: "A1:H9"}
			for b := []byte(in); len(b) > 0; {
				n := min(size, len(b))
				if k, err := d.Write(b[:n]); err != nil || k != n {
					t.Fatalf("write: %d, %v", k, err)
				}
				b = b[n:]
			}
			if err := d.end(); err != nil {
				t.Fatal(err)
			}
			if out.String() != want {
				t.Errorf("in writes of %d bytes\n%s\nbecame\n%s\nwant\n%s", size, in, out.String(), want)
			}
		}
	}
}
