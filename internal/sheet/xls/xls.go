// Package xls reads legacy Excel 97–2003 workbooks (.xls, BIFF8) a row at a time, within
// sheettype.Limits: Open reads a workbook's globals (its worksheets and shared string
// table), Book.Sheet streams one worksheet's rows as a *Sheet. Package sheet, which picks
// the sheet and counts its rows (Inspect) and serves them (Open), is its only user. A file
// that is damaged, encrypted or older than Excel 97 fails with a *sheettype.Error.
package xls

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/richardlehane/mscfb"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// Legacy Excel 97–2003 workbooks (.xls, BIFF8). The container is an OLE compound file, read
// with github.com/richardlehane/mscfb (maintained, used by siegfried, reads a stream a
// sector at a time through an io.ReaderAt, so nothing is loaded whole). The workbook stream
// inside is a sequence of records that Sheet reads one at a time, as package sheet's .xlsx
// reader reads XML: the shared string table goes into the Strings Open is given (sheet's
// table, which spills to disk as an .xlsx's does), a record is at most 8,224 bytes, a cell
// at most MaxCellChars characters (cut and flagged), a row at most MaxRowBytes of values
// and MaxColumns columns. The Go .xls readers (shakinm/xlsReader, extrame/xls) were not
// used: both read the whole stream and every sheet into memory when the file is opened,
// index records without bounds checks (a damaged file panics) and, in xlsReader, drop read
// errors.

// Limits of the format itself (BIFF8).
const (
	// MaxRows is the most rows an .xls sheet has.
	MaxRows = 65_536
	// MaxColumns is the most columns an .xls sheet has (A to IV).
	MaxColumns = 256
	// maxRecord is the most data a BIFF8 record holds.
	maxRecord = 8_224
)

// BIFF8 record types read.
const (
	recFormula    = 0x0006
	recEOF        = 0x000A
	recFilePass   = 0x002F
	recContinue   = 0x003C
	recBoundSheet = 0x0085
	recMulRK      = 0x00BD
	recRString    = 0x00D6
	recSST        = 0x00FC
	recLabelSST   = 0x00FD
	recNumber     = 0x0203
	recLabel      = 0x0204
	recBoolErr    = 0x0205
	recString     = 0x0207
	recRK         = 0x027E
	recBOF        = 0x0809
)

// damaged is the problem for a workbook stream that does not hold what BIFF8 says.
func damaged(format string, args ...any) *sheettype.Error {
	return sheettype.Errorf(sheettype.DamagedFile, "the .xls file is damaged: %s; open it in Excel or LibreOffice and save it again (as .xlsx if you can)", fmt.Sprintf(format, args...))
}

// biffReader reads records from a workbook stream.
type biffReader struct {
	r    *bufio.Reader
	data [maxRecord]byte
	// pending is a record read ahead and pushed back.
	pending bool
	pendTyp uint16
	pendLen int
}

func newBIFFReader(r io.Reader) *biffReader {
	return &biffReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next record; data is valid until the next call. io.EOF at the end.
func (b *biffReader) next() (uint16, []byte, error) {
	if b.pending {
		b.pending = false
		return b.pendTyp, b.data[:b.pendLen], nil
	}
	var h [4]byte
	if _, err := io.ReadFull(b.r, h[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil, io.EOF
		}
		return 0, nil, damaged("the workbook stream ends inside a record")
	}
	typ, n := binary.LittleEndian.Uint16(h[:2]), int(binary.LittleEndian.Uint16(h[2:]))
	if n > maxRecord {
		return 0, nil, damaged("a record of %d bytes, more than BIFF8 allows", n)
	}
	if _, err := io.ReadFull(b.r, b.data[:n]); err != nil {
		return 0, nil, damaged("the workbook stream ends inside a record")
	}
	b.pendTyp, b.pendLen = typ, n
	return typ, b.data[:n], nil
}

// unread pushes the record last returned back.
func (b *biffReader) unread() { b.pending = true }

// nextIn is next for a record that must come before the end of part ("the sheet"): a
// stream that ends first is a damaged file.
func (b *biffReader) nextIn(part string) (uint16, []byte, error) {
	typ, data, err := b.next()
	if errors.Is(err, io.EOF) {
		return 0, nil, damaged("%s has no end", part)
	}
	return typ, data, err
}

// sheetRef is a worksheet listed in the workbook globals.
type sheetRef struct {
	name   string
	offset int64 // of its BOF record in the workbook stream
}

// Strings keeps a workbook's shared string table as Open reads it, for the cells that refer
// to it: package sheet's table, which moves to an unlinked temp file past a size. Add is
// given each string in turn, cut says it was longer than MaxCellChars.
type Strings interface {
	Add(text []byte, cut bool) error
	Get(i int) (text string, cut bool, err error)
	Len() int
	Close()
}

// Book is an opened .xls: its workbook stream, the worksheets and the shared strings.
type Book struct {
	stream     *mscfb.File
	lim        sheettype.Limits
	sheets     []sheetRef
	newStrings func() Strings
	sst        Strings // nil until the table is read
}

// Close releases the shared strings. The ReaderAt Open read is the caller's to close.
func (bk *Book) Close() {
	if bk.sst != nil {
		bk.sst.Close()
	}
}

// Sheets lists the names of the worksheets, in workbook order.
func (bk *Book) Sheets() []string {
	names := make([]string, len(bk.sheets))
	for i, s := range bk.sheets {
		names[i] = s.name
	}
	return names
}

// Open opens the workbook stream of the compound file in the size bytes of r and reads its
// globals: the sheet list and the shared string table, kept in a Strings from newStrings.
// Zero fields of lim take their defaults.
func Open(r io.ReaderAt, size int64, lim sheettype.Limits, newStrings func() Strings) (*Book, error) {
	lim = lim.WithDefaults()
	doc, err := openCFB(r)
	if err != nil {
		return nil, err
	}
	var book *mscfb.File
	encrypted := false
	for f, err := doc.Next(); err == nil; f, err = doc.Next() {
		switch f.Name {
		case "Workbook", "Book":
			if book == nil && len(f.Path) == 0 {
				book = f
			}
		case "EncryptedPackage", "EncryptionInfo":
			encrypted = true
		}
	}
	switch {
	case encrypted:
		return nil, sheettype.Errorf(sheettype.UnsupportedFormat, "this workbook is password-protected; open it, remove the password and save it again")
	case book == nil:
		return nil, sheettype.Errorf(sheettype.UnsupportedFormat, "this is an Office file but not an Excel workbook (it has no Workbook stream): a Word or PowerPoint document, perhaps")
	case book.Size > size:
		return nil, damaged("its workbook stream claims %s, more than the whole file", sheettype.SizeWords(book.Size))
	}
	bk := &Book{stream: book, lim: lim, newStrings: newStrings}
	br := newBIFFReader(book)
	if err := bk.readGlobals(br); err != nil {
		bk.Close()
		return nil, err
	}
	return bk, nil
}

// openCFB opens the compound file, turning the library's errors (and any panic it may have
// on a hostile file) into a file problem.
func openCFB(r io.ReaderAt) (doc *mscfb.Reader, err error) {
	defer func() {
		if p := recover(); p != nil {
			doc, err = nil, damaged("its file structure cannot be read")
		}
	}()
	doc, err = mscfb.New(r)
	if err != nil {
		// The library's words (offsets, sector numbers) mean nothing to the uploader.
		return nil, damaged("its file structure cannot be read (the file may be cut short, or not an Excel file)")
	}
	return doc, nil
}

func (bk *Book) readGlobals(br *biffReader) error {
	typ, data, err := br.next()
	if err != nil {
		return damaged("the workbook stream is empty")
	}
	if typ != recBOF || len(data) < 4 {
		return damaged("the workbook stream does not start with a BOF record")
	}
	if v := binary.LittleEndian.Uint16(data); v != 0x0600 {
		return sheettype.Errorf(sheettype.UnsupportedFormat,
			"this is an Excel 5.0/95 or older workbook, which is not read; open it in Excel or LibreOffice and save it as .xlsx")
	}
	for {
		typ, data, err := br.nextIn("the workbook globals")
		if err != nil {
			return err
		}
		switch typ {
		case recEOF:
			return nil
		case recFilePass:
			return sheettype.Errorf(sheettype.UnsupportedFormat, "this workbook is password-protected; open it, remove the password and save it again")
		case recBoundSheet:
			if len(data) < 8 {
				return damaged("a sheet entry is cut short")
			}
			if data[5] != 0 { // 0 worksheet; 2 chart, 1 macro sheet, 6 VB module
				continue
			}
			if len(bk.sheets) >= bk.lim.MaxEntries {
				return damaged("it lists more than %s sheets", sheettype.Thousands(int64(bk.lim.MaxEntries)))
			}
			name, err := shortString(data[6:])
			if err != nil {
				return err
			}
			bk.sheets = append(bk.sheets, sheetRef{name: name, offset: int64(binary.LittleEndian.Uint32(data))})
		case recSST:
			if bk.sst != nil {
				continue
			}
			if bk.sst, err = readSST(br, data, bk.lim, bk.newStrings); err != nil {
				return err
			}
		}
	}
}

// shortString reads a ShortXLUnicodeString (a sheet name).
func shortString(b []byte) (string, error) {
	if len(b) < 2 {
		return "", damaged("a sheet name is cut short")
	}
	n, high := int(b[0]), b[1]&1 == 1
	b = b[2:]
	if high {
		if len(b) < 2*n {
			return "", damaged("a sheet name is cut short")
		}
		u := make([]uint16, n)
		for i := range u {
			u[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		return string(utf16.Decode(u)), nil
	}
	if len(b) < n {
		return "", damaged("a sheet name is cut short")
	}
	r := make([]rune, n)
	for i := range r {
		r[i] = rune(b[i])
	}
	return string(r), nil
}

// recordStream reads the data of a record and the CONTINUE records after it as one stream,
// telling its reader where a continuation starts (strings split across records restate
// their character width there).
type recordStream struct {
	br   *biffReader
	cur  []byte
	copy [maxRecord]byte
	// atStart: the next byte is the first of a CONTINUE record.
	atStart bool
}

func newRecordStream(br *biffReader, first []byte) *recordStream {
	s := &recordStream{br: br}
	s.cur = s.copy[:copy(s.copy[:], first)]
	return s
}

// more moves to the next CONTINUE record; false when the record ends without one.
func (s *recordStream) more() (bool, error) {
	typ, data, err := s.br.next()
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if typ != recContinue {
		s.br.unread()
		return false, nil
	}
	s.cur = s.copy[:copy(s.copy[:], data)]
	s.atStart = true
	return true, nil
}

// refill moves to the next CONTINUE record when the current one is used up: errShortRecord
// when the record ends there.
func (s *recordStream) refill() error {
	if len(s.cur) > 0 {
		return nil
	}
	ok, err := s.more()
	if err != nil {
		return err
	}
	if !ok {
		return errShortRecord
	}
	return nil
}

// read fills p, across CONTINUE records.
func (s *recordStream) read(p []byte) error {
	for len(p) > 0 {
		if err := s.refill(); err != nil {
			return err
		}
		n := copy(p, s.cur)
		s.cur, p = s.cur[n:], p[n:]
		s.atStart = false
	}
	return nil
}

func (s *recordStream) skip(n int64) error {
	for n > 0 {
		if err := s.refill(); err != nil {
			return err
		}
		k := int(min(n, int64(len(s.cur))))
		s.cur, n = s.cur[k:], n-int64(k)
		s.atStart = false
	}
	return nil
}

var errShortRecord = errors.New("record cut short")

// unicodeString reads an XLUnicodeRichExtendedString (rich: the SST's form, with format runs
// and phonetic data, which are skipped) or an XLUnicodeString into text, cutting it at the
// buffer's limit. Character data split across CONTINUE records restates its width there.
func (s *recordStream) unicodeString(text *sheettype.Text, rich bool) error {
	var h [3]byte
	if err := s.read(h[:]); err != nil {
		return err
	}
	cch, flags := int(binary.LittleEndian.Uint16(h[:2])), h[2]
	var runs, ext int64
	if rich && flags&0x08 != 0 {
		var b [2]byte
		if err := s.read(b[:]); err != nil {
			return err
		}
		runs = int64(binary.LittleEndian.Uint16(b[:]))
	}
	if rich && flags&0x04 != 0 {
		var b [4]byte
		if err := s.read(b[:]); err != nil {
			return err
		}
		ext = int64(binary.LittleEndian.Uint32(b[:]))
	}
	high := flags&1 == 1
	var surrogate rune
	for i := 0; i < cch; i++ {
		if len(s.cur) == 0 {
			ok, err := s.more()
			if err != nil {
				return err
			}
			if !ok || len(s.cur) == 0 {
				return errShortRecord
			}
			high, s.cur = s.cur[0]&1 == 1, s.cur[1:]
		}
		var u rune
		if high {
			var b [2]byte
			if err := s.read(b[:]); err != nil {
				return err
			}
			u = rune(binary.LittleEndian.Uint16(b[:]))
		} else {
			u, s.cur = rune(s.cur[0]), s.cur[1:]
		}
		switch {
		case utf16.IsSurrogate(u) && u < 0xDC00:
			if surrogate != 0 {
				text.AddRune(utf8.RuneError)
			}
			surrogate = u
			continue
		case utf16.IsSurrogate(u) && surrogate != 0:
			u, surrogate = utf16.DecodeRune(surrogate, u), 0
		case utf16.IsSurrogate(u):
			u = utf8.RuneError
		case surrogate != 0:
			text.AddRune(utf8.RuneError)
			surrogate = 0
		}
		if u == 0 {
			u = utf8.RuneError // the database cannot store NUL
		}
		text.AddRune(u)
	}
	if surrogate != 0 {
		text.AddRune(utf8.RuneError)
	}
	return s.skip(4*runs + ext)
}

// readSST reads the shared string table from its SST record (data) and the CONTINUE
// records after it, into a Strings from newStrings.
func readSST(br *biffReader, data []byte, lim sheettype.Limits, newStrings func() Strings) (Strings, error) {
	if len(data) < 8 {
		return nil, damaged("the shared string table is cut short")
	}
	unique := int64(binary.LittleEndian.Uint32(data[4:]))
	if unique > int64(lim.MaxSharedStrings) {
		return nil, sheettype.Errorf(sheettype.DamagedFile, "the workbook's shared string table has more than %s entries", sheettype.Thousands(int64(lim.MaxSharedStrings)))
	}
	s := newRecordStream(br, data[8:])
	sst := newStrings()
	text := sheettype.NewText(lim.MaxCellChars)
	for i := int64(0); i < unique; i++ {
		text.Reset()
		if len(s.cur) == 0 {
			if ok, err := s.more(); err != nil || !ok {
				if err == nil {
					break // fewer strings than declared: the rest are never referenced
				}
				sst.Close()
				return nil, err
			}
		}
		if err := s.unicodeString(&text, true); err != nil {
			sst.Close()
			if errors.Is(err, errShortRecord) {
				return nil, damaged("shared string %d is cut short", i)
			}
			return nil, err
		}
		if err := sst.Add(text.Bytes(), text.Cut()); err != nil {
			sst.Close()
			return nil, err
		}
	}
	// Whatever the table's CONTINUE records still hold is not read.
	for {
		typ, _, err := br.nextIn("the workbook globals")
		if err != nil {
			sst.Close()
			return nil, err
		}
		if typ != recContinue {
			br.unread()
			return sst, nil
		}
	}
}

// Sheet streams one worksheet of an .xls: cell records in row order, assembled into
// rows. Rows the sheet skips come back empty, so row numbers stay the spreadsheet's.
//
// Cell values are the raw stored values, as package sheet gives an .xlsx's: strings, numbers
// written as Excel writes them in an .xlsx, booleans as 0/1, errors as #N/A…, a formula's
// saved result.
type Sheet struct {
	book *Book
	br   *biffReader
	lim  sheettype.Limits
	text sheettype.Text
	// The row being assembled (0-based index) and the one after it, read ahead.
	n         int
	cells     []string
	long      []int
	building  int // row index being assembled, -1 before the first cell
	bCells    []string
	bLong     []int
	bBytes    int64
	ready     []builtRow // rows complete, oldest first (at most one)
	done      bool
	err       error
	maxColumn int
}

type builtRow struct {
	n     int // 1-based
	cells []string
	long  []int
}

// Sheet opens the named worksheet (empty: the first) of an opened book. Closing the Sheet
// closes the book.
func (bk *Book) Sheet(name string) (*Sheet, error) {
	if len(bk.sheets) == 0 {
		return nil, sheettype.Errorf(sheettype.NoSheets, "the workbook has no worksheets")
	}
	ref := bk.sheets[0]
	if name != "" {
		found := false
		for _, s := range bk.sheets {
			if s.name == name {
				ref, found = s, true
				break
			}
		}
		if !found {
			return nil, sheettype.Errorf(sheettype.SheetNotFound, "the sheet %q is not in the workbook", name)
		}
	}
	if ref.offset < 0 || ref.offset >= bk.stream.Size {
		return nil, damaged("the sheet %q starts outside the workbook stream", ref.name)
	}
	if _, err := bk.stream.Seek(ref.offset, io.SeekStart); err != nil {
		return nil, damaged("the sheet %q cannot be found in the workbook stream", ref.name)
	}
	br := newBIFFReader(bk.stream)
	typ, data, err := br.next()
	if err != nil || typ != recBOF || len(data) < 4 {
		return nil, damaged("the sheet %q does not start where the workbook says", ref.name)
	}
	if dt := binary.LittleEndian.Uint16(data[2:]); dt != 0x0010 {
		return nil, sheettype.Errorf(sheettype.SheetNotFound, "the sheet %q is not a worksheet (a chart or macro sheet)", ref.name)
	}
	return &Sheet{book: bk, br: br, lim: bk.lim, text: sheettype.NewText(bk.lim.MaxCellChars), building: -1,
		maxColumn: min(bk.lim.MaxColumns, MaxColumns)}, nil
}

// Next advances one row.
func (s *Sheet) Next() bool {
	if s.err != nil {
		return false
	}
	for len(s.ready) == 0 && !s.done {
		if err := s.readCell(); err != nil {
			s.err = err
			return false
		}
	}
	if len(s.ready) == 0 {
		return false
	}
	s.n++
	next := s.ready[0]
	if s.n < next.n {
		s.cells, s.long = nil, nil
		return true
	}
	s.cells, s.long = next.cells, next.long
	s.ready = s.ready[:0]
	return true
}

// readCell reads records up to the next cell value (or the end of the sheet) and adds it.
func (s *Sheet) readCell() error {
	typ, data, err := s.br.nextIn("the sheet")
	if err != nil {
		return err
	}
	switch typ {
	case recEOF:
		s.finishRow()
		s.done = true
		return nil
	case recMulRK:
		return s.addMulRK(data)
	}
	// A cell record starts with its row and column. They are kept now: a formula's text
	// result is in the record after it, and reading that one reuses data's buffer.
	var at [4]byte
	copy(at[:], data)
	v, cut, isCell, err := s.cellValue(typ, data)
	if err != nil || !isCell {
		return err
	}
	return s.add(int(binary.LittleEndian.Uint16(at[:])), int(binary.LittleEndian.Uint16(at[2:])), v, cut)
}

// addMulRK adds the numbers of a MULRK record: one row, consecutive columns.
func (s *Sheet) addMulRK(data []byte) error {
	if len(data) < 6 || (len(data)-6)%6 != 0 {
		return damaged("a MULRK record has %d bytes", len(data))
	}
	row, first := int(binary.LittleEndian.Uint16(data)), int(binary.LittleEndian.Uint16(data[2:]))
	for i := 0; i*6+4+6 <= len(data); i++ {
		v := rkValue(binary.LittleEndian.Uint32(data[4+i*6+2:]))
		if err := s.add(row, first+i, v, false); err != nil {
			return err
		}
	}
	return nil
}

// cellValue is the value of a cell record of type typ, and whether it was cut at
// MaxCellChars; isCell is false for the records that hold no value.
func (s *Sheet) cellValue(typ uint16, data []byte) (v string, cut, isCell bool, err error) {
	switch typ {
	case recLabelSST:
		if len(data) < 10 {
			return "", false, false, damaged("a cell record is cut short")
		}
		i := binary.LittleEndian.Uint32(data[6:])
		if s.book.sst == nil || int64(i) >= int64(s.book.sst.Len()) {
			return "", false, false, damaged("a cell refers to shared string %d, which does not exist", i)
		}
		v, cut, err = s.book.sst.Get(int(i))
		return v, cut, err == nil, err
	case recLabel, recRString:
		if len(data) < 6 {
			return "", false, false, damaged("a cell record is cut short")
		}
		s.text.Reset()
		rs := newRecordStream(s.br, data[6:])
		if err := rs.unicodeString(&s.text, false); err != nil {
			if errors.Is(err, errShortRecord) {
				return "", false, false, damaged("a text cell is cut short")
			}
			return "", false, false, err
		}
		return string(s.text.Bytes()), s.text.Cut(), true, nil
	case recNumber:
		if len(data) < 14 {
			return "", false, false, damaged("a cell record is cut short")
		}
		return formatNumber(math.Float64frombits(binary.LittleEndian.Uint64(data[6:]))), false, true, nil
	case recRK:
		if len(data) < 10 {
			return "", false, false, damaged("a cell record is cut short")
		}
		return rkValue(binary.LittleEndian.Uint32(data[6:])), false, true, nil
	case recBoolErr:
		if len(data) < 8 {
			return "", false, false, damaged("a cell record is cut short")
		}
		return boolErr(data[6], data[7] == 1), false, true, nil
	case recFormula:
		if len(data) < 20 {
			return "", false, false, damaged("a cell record is cut short")
		}
		return s.formulaResult(data[6:14])
	}
	return "", false, false, nil // formats, blanks, row and column info, drawings: not values
}

// formulaResult is the value a FORMULA record saved (res, its 8 result bytes): a number, a
// boolean or an error, or a string in the STRING record that follows.
func (s *Sheet) formulaResult(res []byte) (v string, cut, isCell bool, err error) {
	if res[6] != 0xFF || res[7] != 0xFF {
		return formatNumber(math.Float64frombits(binary.LittleEndian.Uint64(res))), false, true, nil
	}
	switch res[0] {
	case 0: // a string: in the STRING record that follows
		v, cut, err = s.formulaString()
		return v, cut, err == nil, err
	case 1:
		return boolErr(res[2], false), false, true, nil
	case 2:
		return boolErr(res[2], true), false, true, nil
	}
	return "", false, true, nil
}

// formulaString reads the STRING record holding a formula's text result.
func (s *Sheet) formulaString() (string, bool, error) {
	for {
		typ, data, err := s.br.nextIn("the sheet")
		if err != nil {
			return "", false, err
		}
		switch typ {
		case recString:
			s.text.Reset()
			if err := newRecordStream(s.br, data).unicodeString(&s.text, false); err != nil {
				if errors.Is(err, errShortRecord) {
					return "", false, damaged("a formula's text is cut short")
				}
				return "", false, err
			}
			return string(s.text.Bytes()), s.text.Cut(), nil
		case 0x0221, 0x04BC, 0x0236: // ARRAY, SHRFMLA, TABLE come between a formula and its string
			continue
		}
		s.br.unread() // no saved result
		return "", false, nil
	}
}

// add puts a value at row, col (0-based), finishing the row being assembled when the value
// belongs to a later one.
func (s *Sheet) add(row, col int, v string, cut bool) error {
	if col >= s.maxColumn {
		if col >= MaxColumns {
			return damaged("row %d has a cell in column %d; an .xls sheet has at most %d columns (A to IV)", row+1, col+1, MaxColumns)
		}
		return sheettype.OverColumnLimit(row+1, s.lim)
	}
	if row >= MaxRows {
		return damaged("a cell in row %d; an .xls sheet has at most %s rows", row+1, sheettype.Thousands(MaxRows))
	}
	if row < s.building {
		return damaged("a cell of row %d comes after row %d", row+1, s.building+1)
	}
	if v == "" && !cut {
		return nil
	}
	v = stripControls(v)
	if row > s.building {
		s.finishRow()
		s.building = row
	}
	s.bBytes += int64(len(v))
	if s.bBytes > s.lim.MaxRowBytes {
		return sheettype.Errorf(sheettype.RowTooLarge, "row %d holds more than %s; a spreadsheet row is far smaller, so the file is damaged",
			row+1, sheettype.LimitWords(s.lim.MaxRowBytes))
	}
	for len(s.bCells) <= col {
		s.bCells = append(s.bCells, "")
	}
	s.bCells[col] = v
	if cut {
		s.bLong = append(s.bLong, col)
	}
	return nil
}

// finishRow moves the row being assembled to ready.
func (s *Sheet) finishRow() {
	if s.building < 0 || len(s.bCells) == 0 {
		return
	}
	s.ready = append(s.ready, builtRow{n: s.building + 1, cells: s.bCells, long: s.bLong})
	s.bCells, s.bLong, s.bBytes = nil, nil, 0
}

// stripControls replaces the characters a text cell cannot hold (controls other than tab
// and newlines, and the noncharacters U+FFFE and U+FFFF) with U+FFFD.
func stripControls(v string) string {
	if !strings.ContainsFunc(v, isControl) {
		return v
	}
	out := []rune(v)
	for i, r := range out {
		if isControl(r) {
			out[i] = utf8.RuneError
		}
	}
	return string(out)
}

func isControl(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF
}

// rkValue decodes an RK number (a compressed double or integer, maybe ×100).
func rkValue(rk uint32) string {
	var v float64
	if rk&2 != 0 {
		v = float64(int32(rk) >> 2)
	} else {
		v = math.Float64frombits(uint64(rk&0xFFFFFFFC) << 32)
	}
	if rk&1 != 0 {
		v /= 100
	}
	return formatNumber(v)
}

// formatNumber writes a number as an .xlsx stores it: whole numbers without a fraction,
// others in the fewest digits that read back the same.
func formatNumber(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "#NUM!"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	case math.Abs(v) >= 1e-5 && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'E', -1, 64)
}

// boolErr is a BOOLERR value: 1/0 for a boolean, the error's text for an error.
func boolErr(b byte, isErr bool) string {
	if !isErr {
		if b != 0 {
			return "1"
		}
		return "0"
	}
	switch b {
	case 0x00:
		return "#NULL!"
	case 0x07:
		return "#DIV/0!"
	case 0x0F:
		return "#VALUE!"
	case 0x17:
		return "#REF!"
	case 0x1D:
		return "#NAME?"
	case 0x24:
		return "#NUM!"
	case 0x2A:
		return "#N/A"
	}
	return "#N/A"
}

// Row returns the current row's number (1-based) and cells.
func (s *Sheet) Row() (int, []string) { return s.n, s.cells }

// Long lists the columns (0-based, ascending) of the current row cut at MaxCellChars.
func (s *Sheet) Long() []int { return s.long }

// Err is the error that ended reading, nil at the end of the sheet.
func (s *Sheet) Err() error { return s.err }

// Close closes the book the sheet is read from.
func (s *Sheet) Close() error {
	s.book.Close()
	return nil
}
