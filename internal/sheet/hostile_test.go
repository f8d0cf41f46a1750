package sheet

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// readSheet reads every row of a workbook's sheet "S" (no submit checks: the reader must be
// safe on its own), returning the rows, the cut columns of each, and the reader's error.
func readSheet(t testing.TB, p string, lim Limits) (map[int][]string, map[int][]int, error) {
	t.Helper()
	src, err := openXLSX(p, "S", lim, t.TempDir())
	if err != nil {
		return nil, nil, err
	}
	defer src.Close()
	rows, longs := map[int][]string{}, map[int][]int{}
	for src.Next() {
		n, cells := src.Row()
		if len(cells) > 0 {
			rows[n] = cells
		}
		if l := src.Long(); len(l) > 0 {
			longs[n] = l
		}
	}
	return rows, longs, src.Err()
}

// allocated runs f and returns the bytes it allocated on the heap (all of them, not just
// what stays live): a bound on it bounds the memory f can ever hold.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func wantProblem(t testing.TB, err error, code sheettype.Code, msg string) {
	t.Helper()
	var fp *sheettype.Error
	if !errors.As(err, &fp) || fp.Code != code || !strings.Contains(fp.Message, msg) {
		t.Fatalf("err = %v (%T), want a %s problem saying %q", err, err, code, msg)
	}
}

// A cell longer than a cell may be (but within a row's limit) is cut while it streams and
// flagged (the import then rejects its row, saying so).
func TestLongCellIsCutAndFlagged(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("名", 40_000)
	p := book(t, sheetXML(sheettest.Text(headerRow),
		sheettest.Text(`<row r="2"><c t="inlineStr"><is><t>C1</t></is></c><c t="inlineStr"><is><t>`+long+`</t></is></c><c><v>13800138000</v></c></row>`),
		sheettest.Text(`<row r="3"><c t="s"><v>0</v></c><c t="inlineStr"><is><t>n</t></is></c><c><v>13800138001</v></c><c t="s"><v>0</v></c></row>`),
	), []sheettest.Piece{sheettest.Text(`<sst><si><t>` + strings.Repeat("x", 33_000) + `</t></si></sst>`)})
	rows, longs, err := readSheet(t, p, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(rows[2][1]); n != config.Default().Import.MaxCellChars || !slices.Equal(longs[2], []int{1}) {
		t.Fatalf("row 2: name of %d characters, cut columns %v; want %d and [1]", n, longs[2], config.Default().Import.MaxCellChars)
	}
	if len(rows[3][0]) != config.Default().Import.MaxCellChars || !slices.Equal(longs[3], []int{0, 3}) {
		t.Fatalf("row 3: shared string of %d bytes, cut columns %v; want %d and [0 3]", len(rows[3][0]), longs[3], config.Default().Import.MaxCellChars)
	}
}

// A decompression bomb: one inline-string cell of 1,000 MiB of 'A' that deflates to about a
// megabyte. Submit refuses it after reading a row's worth; the reader alone fails the file
// the same way, never holding more than a few megabytes.
func TestGigabyteCellFailsTheFileWithinBoundedMemory(t *testing.T) {
	cell := []sheettest.Piece{sheettest.Text(`<row r="2"><c r="A2" t="inlineStr"><is><t>`), sheettest.Repeat("A", 1000<<20), sheettest.Text(`</t></is></c></row>`)}
	p := book(t, sheetXML(append([]sheettest.Piece{sheettest.Text(headerRow)}, cell...)...), nil)
	if st, _ := statSize(p); st > 2<<20 {
		t.Fatalf("the hostile workbook is %d bytes; it should deflate to about a megabyte", st)
	}
	var readErr, inspectErr error
	used := allocated(func() {
		_, _, readErr = readSheet(t, p, Limits{})
		_, inspectErr = inspectPath(p, XLSX, "", Limits{})
	})
	wantProblem(t, readErr, "row_too_large", "row 2 holds more than 8 MB")
	wantProblem(t, inspectErr, "row_too_large", "row 2 holds more than 8 MB")
	if used > 48<<20 {
		t.Fatalf("reading the file allocated %d MB", used>>20)
	}
	// Without a header above it, the same cell is row 1.
	p = book(t, sheetXML(sheettest.Text(`<row>`), sheettest.Text(`<c t="inlineStr"><is><t>`), sheettest.Repeat("A", 1000<<20), sheettest.Text(`</t></is></c></row>`)), nil)
	_, _, readErr = readSheet(t, p, Limits{})
	wantProblem(t, readErr, "row_too_large", "row 1 holds more than 8 MB")
}

func statSize(p string) (int64, error) {
	info, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// A shared string of 1,000 MiB fails the file while the table loads.
func TestGigabyteSharedStringFailsTheFile(t *testing.T) {
	p := book(t, sheetXML(sheettest.Text(headerRow), sheettest.Text(`<row r="2"><c t="s"><v>0</v></c></row>`)),
		[]sheettest.Piece{sheettest.Text(`<sst><si><t>`), sheettest.Repeat("A", 1000<<20), sheettest.Text(`</t></si></sst>`)})
	var err error
	used := allocated(func() { _, _, err = readSheet(t, p, Limits{}) })
	wantProblem(t, err, "row_too_large", "shared string 0 of the workbook holds more than 8 MB")
	if used > 48<<20 {
		t.Fatalf("reading the file allocated %d MB", used>>20)
	}
}

func TestRowLimits(t *testing.T) {
	t.Parallel()
	// 300 cells of one 32,767-character shared string: 9.8 MB of values from 10 KB of XML.
	var amplified strings.Builder
	amplified.WriteString(`<row r="2">`)
	for range 300 {
		amplified.WriteString(`<c t="s"><v>0</v></c>`)
	}
	amplified.WriteString(`</row>`)
	var wide strings.Builder
	wide.WriteString(`<row r="2">`)
	for range config.Default().Import.MaxColumns + 1 {
		wide.WriteString(`<c><v>1</v></c>`)
	}
	wide.WriteString(`</row>`)
	bigString := []sheettest.Piece{sheettest.Text(`<sst><si><t>` + strings.Repeat("x", 32_767) + `</t></si></sst>`)}
	for name, c := range map[string]struct {
		row  string
		sst  []sheettest.Piece
		code sheettype.Code
		msg  string
	}{
		"a cell beyond column XFD":      {`<row r="2"><c r="XFE2"><v>1</v></c></row>`, nil, "too_many_columns", "row 2 has a value beyond column XFD"},
		"16,385 cells without refs":     {wide.String(), nil, "too_many_columns", "row 2 has a value beyond column XFD; a sheet has at most 16,384 columns"},
		"shared strings over row bytes": {amplified.String(), bigString, "row_too_large", "row 2 holds more than 8 MB"},
		"a cell ref of any length":      {`<row r="2"><c r="` + strings.Repeat("Z", 5000) + `2"><v>1</v></c></row>`, nil, "too_many_columns", "row 2"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, _, err := readSheet(t, book(t, sheetXML(sheettest.Text(headerRow), sheettest.Text(c.row)), c.sst), Limits{})
			wantProblem(t, err, c.code, c.msg)
		})
	}
}

// Two entries declaring 2^63 bytes each add up to 0 in a uint64: the sum must not wrap. And
// the reader must not trust declared sizes: what it decompresses is counted.
func TestZip64SizesCannotWrapAroundTheLimit(t *testing.T) {
	t.Parallel()
	sheet := sheetXML(sheettest.Text(headerRow), sheettest.Repeat(`<row><c><v>1</v></c><c><v>2</v></c><c><v>3</v></c></row>        `, 56<<20))
	parts := sheettest.BookParts(sheet, nil)
	parts[3].Declare = 1 << 63
	parts = append(parts, sheettest.Part{Name: "xl/media/padding.bin", Pieces: []sheettest.Piece{sheettest.Text("x")}, Declare: 1 << 63})
	p := writeTemp(t, "wrap.xlsx", sheettest.Zip(t, parts...))
	zr, err := zip.OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	var wrapped uint64
	for _, f := range zr.File {
		wrapped += f.UncompressedSize64
	}
	zr.Close()
	if wrapped > 1<<30 {
		t.Fatalf("the test file does not wrap around: declared sizes add up to %d", wrapped)
	}
	_, err = inspectPath(p, XLSX, "", Limits{})
	wantProblem(t, err, "too_large_uncompressed", "claim to expand to more than any disk holds")

	// Past submit (the reader alone), decompression stops at the limit.
	_, _, err = readSheet(t, p, Limits{MaxUncompressed: 16 << 20})
	wantProblem(t, err, "too_large_uncompressed", "expands to more than 16 MB when unpacked")
	// Honest sizes, but the parts together are over the limit.
	honest := writeTemp(t, "two.xlsx", sheettest.Zip(t, sheettest.BookParts(sheetXML(sheettest.Text(headerRow), sheettest.Repeat("<row><c><v>1234567</v></c></row>", 12<<20)),
		[]sheettest.Piece{sheettest.Text("<sst>"), sheettest.Repeat("<si><t>abcdefghijklmnop</t></si>", 9<<20), sheettest.Text("</sst>")})...))
	_, _, err = readSheet(t, honest, Limits{MaxUncompressed: 16 << 20})
	wantProblem(t, err, "too_large_uncompressed", "expands to more than 16 MB")
	if _, err := inspectPath(honest, XLSX, "", Limits{MaxUncompressed: 16 << 20}); err == nil {
		t.Fatal("submit let the honest 21 MB workbook through a 16 MB limit")
	}
}

// archive/zip keeps every central directory record it finds; the directory is bounded before
// it is opened.
func TestZipDirectoryIsBoundedBeforeOpening(t *testing.T) {
	t.Parallel()
	parts := sheettest.BookParts(sheetXML(sheettest.Text(headerRow)), nil)
	for i := range 300 {
		parts = append(parts, sheettest.Part{Name: fmt.Sprintf("xl/media/%d.bin", i), Pieces: []sheettest.Piece{sheettest.Text("x")}})
	}
	p := writeTemp(t, "many.xlsx", sheettest.Zip(t, parts...))
	_, err := inspectPath(p, XLSX, "", Limits{MaxEntries: 100})
	wantProblem(t, err, "damaged_file", "holds more than 100 parts")
	_, err = openXLSX(p, "S", Limits{MaxEntries: 100}, t.TempDir())
	wantProblem(t, err, "damaged_file", "holds more than 100 parts")
	if _, err := inspectPath(p, XLSX, "", Limits{}); err != nil {
		t.Fatalf("304 parts under the default limit: %v", err)
	}
}

// A sheet that declares two rows and holds more: submit counts when the declaration is
// implausible or the sheet small, the worker always counts before its first batch.
func TestLyingDimensionIsCounted(t *testing.T) {
	t.Parallel()
	rows := []sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C2"/><sheetData>`), sheettest.Text(headerRow)}
	for i := 2; i <= 201; i++ {
		rows = append(rows, sheettest.Text(fmt.Sprintf(`<x:row r="%d"><x:c><x:v>%d</x:v></x:c></x:row>`, i, i)))
	}
	p := book(t, append(rows, sheettest.Text(`</sheetData></worksheet>`)), nil)
	lim := Limits{MaxRows: 50}
	_, err := inspectPath(p, XLSX, "", lim)
	wantProblem(t, err, "too_many_rows", `the sheet "S" has 200 rows, over the limit of 50`)
	_, err = inspect(p, XLSX, "", lim, CountAlways)
	wantProblem(t, err, "too_many_rows", "has 200 rows")
	ins, err := inspect(p, XLSX, "", lim, CountNever)
	if err != nil || ins.Rows != 1 || ins.Counted {
		t.Fatalf("trusting the declaration: %+v, %v", ins, err)
	}
	ins, err = inspect(p, XLSX, "", Limits{}, CountAlways)
	if err != nil || ins.Rows != 200 || !ins.Counted {
		t.Fatalf("counted: %+v, %v; want 200 data rows", ins, err)
	}
}

// Data rows are counted the way the person who made the file counts them.
func TestDataRowsAreCountedLikeAPerson(t *testing.T) {
	t.Parallel()
	lines := func(n int, tail string) []byte {
		var b bytes.Buffer
		b.WriteString("code,name,phone\n")
		for i := range n {
			fmt.Fprintf(&b, "C%d,n,1380013%04d\n", i, i)
		}
		b.WriteString(tail)
		return b.Bytes()
	}
	lim := Limits{MaxRows: 50}
	for name, c := range map[string]struct {
		csv  []byte
		rows int
		err  string
	}{
		"exactly the limit with a trailing newline": {lines(50, ""), 50, ""},
		"no trailing newline":                       {bytes.TrimSuffix(lines(50, ""), []byte("\n")), 50, ""},
		"blank lines and empty rows at the end":     {lines(50, "\n\r\n,,,\n  \n"), 50, ""},
		"one over":                                  {lines(51, ""), 0, "the file has 51 rows, over the limit of 50"},
		"header only":                               {lines(0, ""), 0, ""},
		"CRLF":                                      {bytes.ReplaceAll(lines(50, ""), []byte("\n"), []byte("\r\n")), 50, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ins, err := inspectPath(writeTemp(t, "f.csv", c.csv), CSV, "", lim)
			if c.err != "" {
				wantProblem(t, err, "too_many_rows", c.err)
				return
			}
			if err != nil || ins.Rows != c.rows {
				t.Fatalf("Rows = %d, %v; want %d", ins.Rows, err, c.rows)
			}
		})
	}
	// xlsx: the declared dimension and the count agree on data rows.
	p := book(t, []sheettest.Piece{sheettest.Text(`<worksheet><dimension ref="A1:C51"/><sheetData>`), sheettest.Text(headerRow),
		sheettest.Repeat(`<row><c><v>1</v></c></row>`, 50*26), sheettest.Text(`</sheetData></worksheet>`)}, nil)
	for _, mode := range []CountMode{CountAuto, CountAlways, CountNever} {
		if ins, err := inspect(p, XLSX, "", lim, mode); err != nil || ins.Rows != 50 {
			t.Fatalf("mode %d: Rows = %d, %v; want 50", mode, ins.Rows, err)
		}
	}
}

// csvRows reads a CSV with the bounded reader.
func csvRows(r io.Reader, lim Limits) (rows [][]string, lines []int, longs map[int][]int, err error) {
	src := newCSVSource(r, nil, lim.WithDefaults())
	longs = map[int][]int{}
	for src.Next() {
		n, cells := src.Row()
		rows, lines = append(rows, cells), append(lines, n)
		if l := src.Long(); l != nil {
			longs[n] = l
		}
	}
	return rows, lines, longs, src.Err()
}

// stdCSV reads a CSV as the importer used to: encoding/csv with lazy quotes.
func stdCSV(b []byte) (rows [][]string, lines []int, err error) {
	br := bytes.NewReader(b)
	if bytes.HasPrefix(b, []byte{0xEF, 0xBB, 0xBF}) {
		br.Seek(3, io.SeekStart) //nolint:errcheck
	}
	r := csv.NewReader(br)
	r.FieldsPerRecord, r.LazyQuotes = -1, true
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return rows, lines, nil
		}
		if err != nil {
			return rows, lines, err
		}
		n, _ := r.FieldPos(0)
		rows, lines = append(rows, rec), append(lines, n)
	}
}

// The bounded CSV reader reads what encoding/csv reads (FuzzCSVReader checks it further).
func TestCSVReaderMatchesEncodingCSV(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"a,b,c\n1,2,3\n",
		"a,b\r\n1,2\r\n",
		"\n\na\n\n\nb\n",
		`a,"b,c",d` + "\n" + `"multi` + "\n" + `line",x` + "\n",
		`"a""b",c` + "\n",
		`"ab"cd,e` + "\n" + `f` + "\n",
		`a"b,c"d` + "\n",
		`"unterminated` + "\nmore\n",
		"x\r",
		"x\ry\r\n",
		"\r\n\r\n",
		"a,\n,b\n,\n",
		`"a"` + "\r\n" + `"b"`,
		"\xEF\xBB\xBFcode,name\nC1,n\n",
		`""` + "\n" + `"",""` + "\n",
		"a,b\r\r\n",
	} {
		want, wantLines, werr := stdCSV([]byte(in))
		got, gotLines, _, err := csvRows(bytes.NewReader([]byte(in)), Limits{})
		if werr != nil || err != nil || !slices.EqualFunc(got, want, slices.Equal) || !slices.Equal(gotLines, wantLines) {
			t.Errorf("%q:\n got %q at %v (%v)\nwant %q at %v (%v)", in, got, gotLines, err, want, wantLines, werr)
		}
	}
}

// endless is n bytes of c, streamed.
type endless struct {
	c byte
	n int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), e.n))
	for i := range k {
		p[i] = e.c
	}
	e.n -= int64(k)
	return k, nil
}

func TestCSVFieldsAreBounded(t *testing.T) {
	t.Parallel()
	// A field of 40,000 characters is cut and flagged; the row is within its byte limit.
	rows, _, longs, err := csvRows(strings.NewReader("code,name,phone\nC1,\""+strings.Repeat("名", 40_000)+"\",13800138000\n"), Limits{})
	if err != nil || utf8.RuneCountInString(rows[1][1]) != config.Default().Import.MaxCellChars || !slices.Equal(longs[2], []int{1}) || rows[1][2] != "13800138000" {
		t.Fatalf("rows %d, cut %v, err %v", len(rows), longs, err)
	}
	// 16,385 fields.
	_, _, _, err = csvRows(strings.NewReader("a\n"+strings.Repeat(",", config.Default().Import.MaxColumns)+"\n"), Limits{})
	wantProblem(t, err, "too_many_columns", "row 2 has a value beyond column XFD")
	// Submit refuses a line longer than a row may be.
	big := append([]byte("code,name,phone\nC1,"), bytes.Repeat([]byte("A"), 9<<20)...)
	_, err = inspectPath(writeTemp(t, "big.csv", big), CSV, "", Limits{})
	wantProblem(t, err, "row_too_large", "line 2 is longer than 8 MB")
}

// A 500 MB field (an unclosed quote) fails the file after MaxRowBytes, in bounded memory.
func TestCSVHugeFieldFailsTheFile(t *testing.T) {
	var err error
	used := allocated(func() {
		_, _, _, err = csvRows(io.MultiReader(strings.NewReader("code,name,phone\nC1,\"n"), &endless{'A', 500 << 20}), Limits{})
	})
	wantProblem(t, err, "row_too_large", "row 2 holds more than 8 MB")
	if used > 16<<20 {
		t.Fatalf("reading allocated %d MB", used>>20)
	}
}
