package sheet

// Fuzz tests. `go test` runs each seed corpus (the fixtures, crafted and hostile files, and
// every crasher ever found, under testdata/fuzz/<Name>/); `go test -fuzz '^FuzzName$'`
// explores. Each checks invariants, not just the absence of a panic.

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// fuzzLimits are small, so the fuzzer meets every bound.
var fuzzLimits = Limits{MaxUncompressed: 1 << 20, MaxEntries: 64, MaxRows: 1000, MaxCellChars: 64,
	MaxColumns: 64, MaxRowBytes: 4096, MaxSharedStrings: 1000}

func fixtures(f *testing.F, pattern string) {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join("../../testdata/imports", pattern))
	if len(paths) == 0 {
		f.Fatalf("no fixtures match %s", pattern)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// isProblem reports whether err is a *sheettype.Error: whatever the bytes, reading them
// fails only in words for the uploader, never with an error the runtime would retry.
func isProblem(err error) bool {
	var fp *sheettype.Error
	return errors.As(err, &fp)
}

// FuzzXLSXReader reads arbitrary bytes as a workbook: submit's checks, then every row.
func FuzzXLSXReader(f *testing.F) {
	fixtures(f, "*.xlsx")
	f.Add(sheettest.Zip(f, sheettest.BookParts(sheetXML(sheettest.Text(headerRow),
		sheettest.Text(`<row r="2"><c t="s"><v>0</v></c><c t="inlineStr"><is><t>a&amp;b&#x4E2D;_x0041_</t></is></c><c r="F2"><v>1</v></c></row>`),
		sheettest.Text(`<row r="4"><x:c r="B4" t="inlineStr"><x:is><x:r><x:t>rich</x:t></x:r><x:rPh><x:t>ph</x:t></x:rPh></x:is></x:c></row>`),
		sheettest.Text(`<row><c><v><![CDATA[cdata<>]]></v></c><!-- note --><c><v>`+strings.Repeat("z", 100)+`</v></c></row>`)),
		[]sheettest.Piece{sheettest.Text(`<sst><si><t xml:space="preserve"> shared </t></si><si/></sst>`)})...))
	f.Add(sheettest.Zip(f, sheettest.BookParts(sheetXML(sheettest.Text(`<row r="1"><c r="XFE1"><v>1</v></c></row>`)), nil)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		if _, err := inspectReader(r, int64(len(data)), XLSX, "", fuzzLimits, CountAlways); err != nil && !isProblem(err) {
			t.Fatalf("Inspect: %v (%T) is not a file problem", err, err)
		}
		readXLSX(t, r, int64(len(data)))
	})
}

// readXLSX opens r as a workbook and reads every row through checkRows; a workbook that
// does not open must fail with a file problem. It reports whether the workbook opened.
func readXLSX(t *testing.T, r io.ReaderAt, size int64) bool {
	t.Helper()
	src, err := newXLSXSource(r, size, "", fuzzLimits, t.TempDir())
	if err != nil {
		if !isProblem(err) {
			t.Fatalf("open: %v (%T) is not a file problem", err, err)
		}
		return false
	}
	defer src.Close()
	checkRows(t, src, fuzzLimits, true)
	return true
}

// FuzzSheetXML reads a workbook whose worksheet and shared strings are the fuzzer's bytes,
// stored uncompressed with correct checksums, so every mutation reaches the XML scanner.
func FuzzSheetXML(f *testing.F) {
	paths, _ := filepath.Glob("../../testdata/imports/*.xlsx")
	for _, p := range paths {
		zr, err := zip.OpenReader(p)
		if err != nil {
			f.Fatal(err)
		}
		var sheet, sst []byte
		for _, zf := range zr.File {
			if zf.Name == "xl/worksheets/sheet1.xml" || zf.Name == "xl/sharedStrings.xml" {
				rc, _ := zf.Open()
				b, _ := io.ReadAll(rc)
				rc.Close()
				if zf.Name == "xl/sharedStrings.xml" {
					sst = b
				} else {
					sheet = b
				}
			}
		}
		zr.Close()
		f.Add(sheet, sst)
	}
	f.Add([]byte(`<worksheet><sheetData>`+headerRow+`<row r="2"><c t="s"><v>0</v></c><c t="inlineStr"><is><t>a&amp;b&#x4E2D;_x0041_</t></is></c><c r="F2"><v>1</v></c></row><row><c><v><![CDATA[x<>]]></v></c><!-- c --><?pi?></row></sheetData></worksheet>`),
		[]byte(`<sst><si><t xml:space="preserve"> shared </t></si><si/><si><r><t>a</t></r><rPh><t>p</t></rPh></si></sst>`))
	f.Fuzz(func(t *testing.T, sheet, sst []byte) {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, p := range sheettest.BookParts([]sheettest.Piece{{B: sheet}}, []sheettest.Piece{{B: sst}}) {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: p.Name, Method: zip.Store})
			for _, pc := range p.Pieces {
				w.Write(pc.B) //nolint:errcheck
			}
		}
		zw.Close()
		data := buf.Bytes()
		if !readXLSX(t, bytes.NewReader(data), int64(len(data))) {
			return
		}
		if _, err := inspectReader(bytes.NewReader(data), int64(len(data)), XLSX, "", fuzzLimits, CountAlways); err != nil && !isProblem(err) {
			t.Fatalf("Inspect: %v (%T) is not a file problem", err, err)
		}
	})
}

// checkRows reads every row and checks the bounds the reader promises; validText: that
// every cell is UTF-8 without NUL (the xlsx reader checks; a CSV is checked by Inspect).
func checkRows(t *testing.T, src source, lim Limits, validText bool) {
	t.Helper()
	last := 0
	for src.Next() {
		n, cells := src.Row()
		if n <= last || n > maxSheetRows {
			t.Fatalf("row %d after row %d", n, last)
		}
		last = n
		if len(cells) > lim.MaxColumns {
			t.Fatalf("row %d has %d cells, over %d", n, len(cells), lim.MaxColumns)
		}
		total := 0
		for i, c := range cells {
			total += len(c)
			if k := sheettype.RuneStarts([]byte(c)); k > lim.MaxCellChars || len(c) > utf8.UTFMax*lim.MaxCellChars {
				t.Fatalf("row %d cell %d has %d characters, over %d", n, i, k, lim.MaxCellChars)
			}
			if validText && (!utf8.ValidString(c) || strings.IndexByte(c, 0) >= 0) {
				t.Fatalf("row %d cell %d is not valid text: %q", n, i, c)
			}
		}
		if int64(total) > lim.MaxRowBytes {
			t.Fatalf("row %d holds %d bytes, over %d", n, total, lim.MaxRowBytes)
		}
		long := src.Long()
		for i, col := range long {
			if col < 0 || col >= len(cells) || (i > 0 && col <= long[i-1]) || validText && utf8.RuneCountInString(cells[col]) != lim.MaxCellChars {
				t.Fatalf("row %d: cut columns %v do not fit cells %q", n, long, cells)
			}
		}
	}
	if err := src.Err(); err != nil && !isProblem(err) {
		t.Fatalf("read: %v (%T) is not a file problem", err, err)
	}
}

// FuzzXLSXMatchesExcelize writes a sheet with excelize from the fuzzer's cells (shared
// strings, or inline strings with the stream writer) and reads it back with both readers:
// ours must see what excelize sees.
func FuzzXLSXMatchesExcelize(f *testing.F) {
	f.Add([]byte("code\x1fname\x1fphone\x1eC1\x1f张三\x1f13800138000\x1e\x1e\x1fgap _x0041_ \x1f1.5"), false)
	f.Add([]byte("a\x1f\x1f\x1fd\x1e  spaced  \x1f=SUM(A1)\x1f<&>\"'\x1e\r\n\x1f\t"), true)
	f.Fuzz(func(t *testing.T, data []byte, stream bool) {
		if len(data) > 4096 || !utf8.Valid(data) {
			return
		}
		var grid [][]string
		for line := range strings.SplitSeq(string(data), "\x1e") {
			grid = append(grid, strings.Split(line, "\x1f"))
		}
		if len(grid) > 50 {
			return
		}
		book := excelize.NewFile()
		defer book.Close()
		if stream {
			sw, err := book.NewStreamWriter("Sheet1")
			if err != nil {
				t.Fatal(err)
			}
			for i, row := range grid {
				vals := make([]any, len(row))
				for j, c := range row {
					vals[j] = c
				}
				if len(vals) > 0 && len(vals) <= 64 {
					if sw.SetRow(fmt.Sprintf("A%d", i+1), vals) != nil {
						return
					}
				}
			}
			if sw.Flush() != nil {
				return
			}
		} else {
			for i, row := range grid {
				for j, c := range row {
					if c != "" && j < 64 {
						cell, _ := excelize.CoordinatesToCellName(j+1, i+1)
						if book.SetCellStr("Sheet1", cell, c) != nil {
							return
						}
					}
				}
			}
		}
		var buf bytes.Buffer
		if _, err := book.WriteTo(&buf); err != nil {
			return
		}
		p := writeTemp(t, "f.xlsx", buf.Bytes())
		want := excelizeRows(t, p, "")
		got := ourRows(t, p, "")
		if len(got) != len(want) {
			t.Fatalf("%d non-empty rows, excelize sees %d:\n got %v\nwant %v", len(got), len(want), got, want)
		}
		for n, w := range want {
			if !slices.Equal(w, got[n]) {
				t.Fatalf("row %d: %q, excelize reads %q", n, got[n], w)
			}
		}
	})
}

// FuzzCSVReader reads arbitrary bytes as a CSV: with room to spare it must read what
// encoding/csv reads (records and line numbers); with small limits it must keep them. And
// submit's data-row count must cover every row that is not blank.
func FuzzCSVReader(f *testing.F) {
	fixtures(f, "*.csv")
	for _, s := range []string{"a,b\r\n\"c\"\"d\",e\r\n", "\"ab\"cd,e\nf", "x\r", "\n\n\"\n\"\n", ",,,\n  \n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantLines, werr := stdCSV(data)
		got, gotLines, _, err := csvRows(bytes.NewReader(data), Limits{})
		if werr == nil && err == nil && (!slices.EqualFunc(got, want, slices.Equal) || !slices.Equal(gotLines, wantLines)) {
			t.Fatalf("got %q at %v\nencoding/csv reads %q at %v", got, gotLines, want, wantLines)
		}
		checkRows(t, newCSVSource(bytes.NewReader(data), nil, fuzzLimits.WithDefaults()), fuzzLimits, false)

		ins, err := inspectReader(bytes.NewReader(data), int64(len(data)), CSV, "", Limits{}, CountAuto)
		if err != nil {
			if !isProblem(err) {
				t.Fatalf("Inspect: %v (%T) is not a file problem", err, err)
			}
			return
		}
		for i, cells := range got {
			if !Blank(cells) && gotLines[i]-1 > ins.Rows {
				t.Fatalf("row %d is not blank but submit counted %d data rows", gotLines[i], ins.Rows)
			}
		}
	})
}

// FuzzInspect checks arbitrary bytes as an .xlsx upload: it is refused with a file problem,
// or accepted within every limit, its declared sizes (added up without overflow) included.
func FuzzInspect(f *testing.F) {
	fixtures(f, "*.xlsx")
	wrap := sheettest.BookParts(sheetXML(sheettest.Text(headerRow)), nil)
	wrap[3].Declare = 1 << 63
	wrap = append(wrap, sheettest.Part{Name: "pad", Pieces: []sheettest.Piece{sheettest.Text("x")}, Declare: 1 << 63})
	f.Add(sheettest.Zip(f, wrap...))
	f.Add(sheettest.Zip(f, sheettest.BookParts([]sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C2"/><sheetData>`), sheettest.Text(headerRow),
		sheettest.Repeat(`<row><c><v>1</v></c></row>`, 2000*26), sheettest.Text(`</sheetData></worksheet>`)}, nil)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mode := range []CountMode{CountAuto, CountAlways, CountNever} {
			ins, err := inspectReader(bytes.NewReader(data), int64(len(data)), XLSX, "", fuzzLimits, mode)
			if err != nil {
				if !isProblem(err) {
					t.Fatalf("Inspect: %v (%T) is not a file problem", err, err)
				}
				continue
			}
			if ins.Rows < 0 || ins.Rows > fuzzLimits.MaxRows || !slices.Contains(ins.Sheets, ins.Sheet) || ins.Counted == (mode == CountNever) && mode != CountAuto {
				t.Fatalf("mode %d: accepted with %+v", mode, ins)
			}
			zr, err := zipReader(data)
			if err != nil {
				t.Fatalf("accepted an archive archive/zip cannot open: %v", err)
			}
			total := new(big.Int)
			for _, zf := range zr.File {
				total.Add(total, new(big.Int).SetUint64(zf.UncompressedSize64))
			}
			if total.Cmp(big.NewInt(fuzzLimits.MaxUncompressed)) > 0 || len(zr.File) > fuzzLimits.MaxEntries {
				t.Fatalf("accepted %d parts declaring %s bytes", len(zr.File), total)
			}
		}
	})
}

func zipReader(data []byte) (*zip.Reader, error) {
	return zip.NewReader(bytes.NewReader(data), int64(len(data)))
}
