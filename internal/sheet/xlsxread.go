package sheet

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// maxSheetRows is the last row number a worksheet can have (Excel's 1,048,576).
const maxSheetRows = 1 << 20

// xlsxSource streams a worksheet straight from the zip with xmlScanner: no reflection per
// cell, little garbage, and memory bounded by construction (see Limits): a cell keeps at
// most MaxCellChars characters and is flagged when cut, a row may span at most MaxRowBytes
// of XML and of values, and hold at most MaxColumns columns, and every part read counts
// against one budget of MaxUncompressed decompressed bytes.
//
// Cell values are the raw stored values, as excelize's RawCellValue option gives them:
// shared and inline strings (rich-text runs joined, phonetic runs skipped), numbers as
// written, booleans as 0/1. The differential test and FuzzXLSXReader check it against
// excelize on files from several producers.
type xlsxSource struct {
	file  io.Closer // the file zr reads, closed with the source
	zr    *zip.Reader
	sheet io.ReadCloser
	sc    *xmlScanner
	sst   *sharedStrings
	lim   Limits
	text  sheettype.Text
	keep  int // columns read of each row (0: all); the cells past them are skipped undecoded

	n         int      // current row number
	cells     []string // current row
	long      []int    // columns of the current row cut at MaxCellChars
	next      int      // number of the row read ahead (0: none)
	reading   int      // number of the row being read, for messages
	ahead     []string // its cells
	aheadLong []int
	done      bool
	err       error
}

// newXLSXSource reads the workbook in the size bytes of r.
func newXLSXSource(r io.ReaderAt, size int64, sheet string, lim Limits, tmpDir string) (*xlsxSource, error) {
	lim = lim.WithDefaults()
	zr, err := openZip(r, size, lim, "the .xlsx file cannot be read (%v); save it again from your spreadsheet program")
	if err != nil {
		return nil, err
	}
	s := &xlsxSource{zr: zr, lim: lim, text: sheettype.NewText(lim.MaxCellChars)}
	if err := s.open(sheet, tmpDir); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *xlsxSource) open(sheet, tmpDir string) error {
	entries := map[string]*zip.File{}
	byName := map[string]*zip.File{}
	for _, f := range s.zr.File {
		entries[strings.ToLower(f.Name)] = f
		byName[f.Name] = f
	}
	b := newBudget(s.lim.MaxUncompressed)
	sheets, err := workbookSheets(byName, b, s.lim)
	if err != nil {
		return partProblem(err, s.lim, "the workbook's sheet list cannot be read")
	}
	var target string
	for _, sh := range sheets {
		if sh.name == sheet || (sheet == "" && target == "") {
			target = sh.path
		}
	}
	zf := entries[strings.ToLower(target)]
	if zf == nil {
		return sheettype.Errorf(sheettype.SheetNotFound, "the sheet %q is not in the workbook", sheet)
	}
	sstEntry, err := sharedStringsEntry(byName, entries, b, s.lim)
	if err != nil {
		return partProblem(err, s.lim, "the workbook's relationships cannot be read")
	}
	if sstEntry != nil {
		if s.sst, err = loadSharedStrings(sstEntry, b, s.lim, tmpDir); err != nil {
			return partProblem(err, s.lim, "the workbook's shared strings cannot be read")
		}
	}
	if s.sheet, err = zf.Open(); err != nil {
		return sheettype.Errorf(sheettype.DamagedFile, "the sheet cannot be read (%v)", err)
	}
	s.sc = newXMLScanner(b.reader(s.sheet), zf.UncompressedSize64, func(local []byte) bool {
		return len(local) == 1 && local[0] == 'c' || string(local) == "row"
	})
	return nil
}

// sharedStringsEntry finds the shared string table through the workbook's relationships,
// falling back to the usual path.
func sharedStringsEntry(byName, lower map[string]*zip.File, b *budget, lim Limits) (*zip.File, error) {
	if zf := byName["xl/_rels/workbook.xml.rels"]; zf != nil {
		rels, err := readRels(zf, b, lim)
		if err != nil {
			return nil, err
		}
		for _, r := range rels {
			if strings.HasSuffix(r.typ, "/sharedStrings") {
				if zf := lower[strings.ToLower(r.target)]; zf != nil {
					return zf, nil
				}
			}
		}
	}
	return lower["xl/sharedstrings.xml"], nil
}

// Next advances one row. Rows the sheet skips come back empty, so row numbers stay the
// spreadsheet's.
func (s *xlsxSource) Next() bool {
	if s.err != nil {
		return false
	}
	if s.next == 0 && !s.done {
		var err error
		s.next, s.ahead, s.aheadLong, err = s.readRow(s.n + 1)
		if err != nil {
			s.err = s.rowProblem(s.n+1, err)
			return false
		}
		if s.next == 0 {
			s.done = true
		}
	}
	if s.next == 0 {
		return false
	}
	s.n++
	if s.n < s.next {
		s.cells, s.long = nil, nil
		return true
	}
	s.cells, s.long, s.next, s.ahead, s.aheadLong = s.ahead, s.aheadLong, 0, nil, nil
	return true
}

// rowProblem words an error met reading the row after row n-1.
func (s *xlsxSource) rowProblem(n int, err error) error {
	var fp *sheettype.Error
	switch {
	case errors.As(err, &fp):
		return fp
	case errors.Is(err, errSpan):
		return sheettype.Errorf(sheettype.RowTooLarge,
			"row %d holds more than %s; a spreadsheet cell holds at most %s characters, so the file is damaged or was not made by a spreadsheet program",
			s.rowNo(n), sheettype.LimitWords(s.lim.MaxRowBytes), sheettype.Thousands(int64(s.lim.MaxCellChars)))
	case errors.Is(err, errOverBudget):
		return overBudget(s.lim)
	}
	return sheettype.Errorf(sheettype.DamagedFile, "the file is damaged near row %d (%v)", s.rowNo(n), err)
}

// rowNo is the number of the row being read: the one read ahead, if its number is known.
func (s *xlsxSource) rowNo(n int) int { return max(n, s.reading) }

// readRow reads the next <row> element; its number defaults to want when it has no r.
func (s *xlsxSource) readRow(want int) (int, []string, []int, error) {
	for {
		switch s.sc.Next() {
		case tokEOF:
			return 0, nil, nil, nil
		case tokErr:
			return 0, nil, nil, s.sc.err
		case tokStart:
			if string(s.sc.name) != "row" {
				continue
			}
			num := want
			if r, ok := s.sc.attr("r"); ok {
				n, err := strconv.Atoi(string(r))
				if err != nil || n < 1 || n > maxSheetRows {
					return 0, nil, nil, fmt.Errorf("bad row number %q", sheettype.Clip(string(r), 20))
				}
				if n < want {
					return 0, nil, nil, fmt.Errorf("row %d comes after row %d", n, want-1)
				}
				num = n
			}
			if num > maxSheetRows {
				return 0, nil, nil, fmt.Errorf("more than %s rows", sheettype.Thousands(maxSheetRows))
			}
			if s.sc.empty {
				return num, nil, nil, nil
			}
			s.reading = num
			s.sc.limitSpan(s.lim.MaxRowBytes)
			cells, long, err := s.readCells(num)
			s.sc.noSpan()
			return num, cells, long, err
		case tokEnd:
			if string(s.sc.name) == "sheetData" {
				return 0, nil, nil, nil
			}
		}
	}
}

// rowCells is a row as readCells reads it: the cells so far, and what is known of the cell
// being read.
type rowCells struct {
	cells    []string
	long     []int // columns cut at MaxCellChars
	rowBytes int64 // bytes of the values so far
	col      int   // column of the cell being read (0-based), -1 before the first
	inCell   bool  // inside <c>…</c>: only there do <v> and <t> make a value
	shared   bool  // t="s": the value is an index into the shared strings
	inline   bool  // t="inlineStr"
	sawT     bool  // the value came from <t> (an inline string), not <v>
	inText   bool  // inside <v>, or <t> of an inline string
	inPh     bool  // inside a phonetic run, whose text is not part of the value
	hasVal   bool
}

// readCells reads the cells of row num, up to </row>.
func (s *xlsxSource) readCells(num int) ([]string, []int, error) {
	r := rowCells{col: -1}
	for {
		switch s.sc.Next() {
		case tokEOF:
			return nil, nil, io.ErrUnexpectedEOF
		case tokErr:
			return nil, nil, s.sc.err
		case tokText:
			if r.inText {
				s.sc.readText(&s.text)
			}
		case tokStart:
			if err := s.startElement(&r, num); err != nil {
				return nil, nil, err
			}
			if s.keep > 0 && r.col >= s.keep {
				return s.skipRest(r)
			}
		case tokEnd:
			switch string(s.sc.name) {
			case "v", "t":
				r.inText = false
			case "rPh":
				r.inPh = false
			case "c":
				if err := s.endCell(&r); err != nil {
					return nil, nil, err
				}
			case "row":
				if s.sc.spanOver() {
					return nil, nil, errSpan
				}
				return r.cells, r.long, nil
			}
		}
	}
}

// skipRest passes over the rest of a row from a cell past the columns kept, up to </row>,
// at the speed of a byte search (xmlScanner.skipToEnd): its cells are neither decoded nor
// checked (no attribute parsed, no text read, no shared string looked up), so a hostile
// wide row costs what scanning its bytes costs. The row's size is still bounded by
// MaxRowBytes.
func (s *xlsxSource) skipRest(r rowCells) ([]string, []int, error) {
	if !s.sc.skipToEnd("row") {
		if s.sc.err == nil {
			return nil, nil, io.ErrUnexpectedEOF
		}
		return nil, nil, s.sc.err
	}
	if s.sc.spanOver() {
		return nil, nil, errSpan
	}
	return r.cells, r.long, nil
}

// startElement takes in a start tag inside row num: a cell, or a part of its value.
func (s *xlsxSource) startElement(r *rowCells, num int) error {
	switch string(s.sc.name) {
	case "c":
		return s.startCell(r, num)
	case "v":
		if r.inCell {
			r.hasVal, r.inText = true, !s.sc.empty
		}
	case "t":
		if r.inCell && !r.inPh {
			r.hasVal, r.inText, r.sawT = true, !s.sc.empty, true
		}
	case "rPh":
		r.inPh = !s.sc.empty
	}
	return nil
}

// startCell takes in a <c> of row num: its column (the next one unless it names one further
// right) and its type.
func (s *xlsxSource) startCell(r *rowCells, num int) error {
	prev := r.col
	r.col++
	if ref, ok := s.sc.attr("r"); ok {
		c, _, ok := cellRef(ref)
		if !ok {
			return fmt.Errorf("bad cell reference %q", sheettype.Clip(string(ref), 20))
		}
		if c-1 <= prev { // a sheet lists a row's cells left to right, once each
			return fmt.Errorf("cell %s comes after column %s", sheettype.Clip(string(ref), 20), sheettype.ColumnName(prev))
		}
		r.col = c - 1
	}
	if s.keep > 0 && r.col >= s.keep {
		return nil // the rest of the row is skipped (skipRest)
	}
	if r.col >= s.lim.MaxColumns {
		return sheettype.OverColumnLimit(num, s.lim)
	}
	t, _ := s.sc.attr("t")
	r.shared = len(t) == 1 && t[0] == 's'
	r.inline = string(t) == "inlineStr"
	s.text.Reset()
	r.hasVal, r.inText, r.sawT = false, false, false
	r.inCell = !s.sc.empty
	return nil
}

// endCell takes in a </c>: the value read, if the cell has one, joins the row.
func (s *xlsxSource) endCell(r *rowCells) error {
	if !r.inCell || !r.hasVal {
		r.inCell = false
		return nil
	}
	r.inCell, r.hasVal = false, false
	v, cut, err := s.value(r.shared)
	if err != nil {
		return err
	}
	if r.inline && r.sawT {
		v = bstrDecode(v)
	}
	if v == "" && !cut {
		return nil
	}
	r.rowBytes += int64(len(v))
	if r.rowBytes > s.lim.MaxRowBytes {
		return errSpan
	}
	for len(r.cells) < r.col {
		r.cells = append(r.cells, "")
	}
	r.cells = append(r.cells, v)
	if cut {
		r.long = append(r.long, r.col)
	}
	return nil
}

// value is the cell's value from the text read, and whether it was cut at MaxCellChars.
func (s *xlsxSource) value(shared bool) (string, bool, error) {
	if err := checkText(s.text.Bytes()); err != nil {
		return "", false, err
	}
	if !shared {
		return string(s.text.Bytes()), s.text.Cut(), nil // n, str, inlineStr, b, d, e: the stored text
	}
	raw := bytes.TrimSpace(s.text.Bytes())
	i, err := strconv.Atoi(string(raw))
	if err != nil || s.text.Cut() {
		return "", false, fmt.Errorf("bad shared string index %q", sheettype.Clip(string(raw), 20))
	}
	if s.sst == nil {
		return "", false, fmt.Errorf("shared string %d referenced but the workbook has none", i)
	}
	return s.sst.Get(i)
}

// bstrDecode undoes the _xHHHH_ escapes Excel writes in strings for characters XML cannot
// hold (ST_Xstring), as excelize does for shared and inline strings: "_x0008_" is U+0008
// and "_x005F_" an underscore. An escape of a surrogate is dropped, as excelize drops it;
// NUL, which the database cannot store, becomes U+FFFD.
func bstrDecode(s string) string {
	if !strings.Contains(s, "_x") {
		return s
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		j := strings.Index(s[i:], "_x")
		if j < 0 {
			break
		}
		j += i
		b.WriteString(s[i:j])
		v, err := strconv.ParseUint(s[min(j+2, len(s)):min(j+6, len(s))], 16, 32)
		if j+7 > len(s) || s[j+6] != '_' || err != nil {
			b.WriteByte('_')
			i = j + 1
			continue
		}
		switch r := rune(v); {
		case r == 0:
			b.WriteRune(utf8.RuneError)
		case utf8.ValidRune(r):
			b.WriteRune(r)
		}
		i = j + 7
	}
	b.WriteString(s[i:])
	return b.String()
}

// cellRef parses a cell reference such as "AB12" into its 1-based column and row. Columns
// far beyond any limit come back capped rather than overflowing.
func cellRef(b []byte) (col, row int, ok bool) {
	i := 0
	for ; i < len(b); i++ {
		c := b[i] | 0x20 // lower case
		if c < 'a' || c > 'z' {
			break
		}
		col = min(col*26+int(c-'a'+1), 1<<30)
	}
	if i == 0 || i == len(b) {
		return 0, 0, false
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		row = min(row*10+int(c-'0'), 1<<30)
	}
	return col, row, row >= 1
}

func (s *xlsxSource) keepColumns(n int)    { s.keep = n }
func (s *xlsxSource) Row() (int, []string) { return s.n, s.cells }
func (s *xlsxSource) Long() []int          { return s.long }
func (s *xlsxSource) Err() error           { return s.err }
func (s *xlsxSource) Close() error {
	if s.sheet != nil {
		s.sheet.Close()
	}
	if s.sst != nil {
		s.sst.Close()
	}
	if s.file != nil {
		return s.file.Close()
	}
	return nil
}

// loadSharedStrings reads an .xlsx's shared string table, spilling it to tmpDir past a size.
func loadSharedStrings(zf *zip.File, b *budget, lim Limits, tmpDir string) (*sharedStrings, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	sst := &sharedStrings{tmpDir: tmpDir}
	sc := newXMLScanner(b.reader(rc), zf.UncompressedSize64, nil)
	text := sheettype.NewText(lim.MaxCellChars)
	var inSI, inT, inPh bool
	fail := func(err error) (*sharedStrings, error) {
		sst.Close()
		return nil, err
	}
	add := func() error { return sst.addXML(&text, lim) }
	for {
		switch sc.Next() {
		case tokEOF:
			return sst, nil
		case tokErr:
			if errors.Is(sc.err, errSpan) {
				return fail(sheettype.Errorf(sheettype.RowTooLarge,
					"shared string %d of the workbook holds more than %s; a spreadsheet cell holds at most %s characters, so the file is damaged or was not made by a spreadsheet program",
					sst.count, sheettype.LimitWords(lim.MaxRowBytes), sheettype.Thousands(int64(lim.MaxCellChars))))
			}
			return fail(sc.err)
		case tokText:
			if inT {
				sc.readText(&text)
			}
		case tokStart:
			switch string(sc.name) {
			case "si":
				text.Reset()
				if sc.empty {
					if err := add(); err != nil {
						return fail(err)
					}
					continue
				}
				inSI = true
				sc.limitSpan(lim.MaxRowBytes)
			case "t":
				inT = inSI && !inPh && !sc.empty
			case "rPh":
				inPh = !sc.empty
			}
		case tokEnd:
			switch string(sc.name) {
			case "t":
				inT = false
			case "rPh":
				inPh = false
			case "si":
				if !inSI {
					continue // an end without a start: not a string
				}
				if sc.spanOver() {
					sc.err = errSpan
					continue
				}
				sc.noSpan()
				inSI = false
				if err := add(); err != nil {
					return fail(err)
				}
			}
		}
	}
}

// addXML adds the text of one <si> of an .xlsx table: checked as XML text, its _xHHHH_
// escapes decoded, remembered as cut when it was.
func (s *sharedStrings) addXML(text *sheettype.Text, lim Limits) error {
	if s.count >= lim.MaxSharedStrings {
		return sheettype.Errorf(sheettype.DamagedFile, "the workbook's shared string table has more than %s entries", sheettype.Thousands(int64(lim.MaxSharedStrings)))
	}
	if err := checkText(text.Bytes()); err != nil {
		return fmt.Errorf("shared string %d: %w", s.count, err)
	}
	b := text.Bytes()
	if bytes.Contains(b, []byte("_x")) {
		b = []byte(bstrDecode(string(b)))
	}
	return s.Add(b, text.Cut())
}
