package sheet

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// csvSource reads a CSV as encoding/csv does with LazyQuotes and a variable number of fields
// (the fuzz test holds the two to the same records and line numbers), but a field at a time:
// encoding/csv reads a whole record into memory before it returns, so one endless quoted
// field would take all of it. Here a field keeps at most MaxCellChars characters (the rest
// is skipped and the cell flagged), a record may span at most MaxRowBytes of input and hold
// at most MaxColumns fields.
//
// The rules, in terms of the byte stream: a CR directly before LF or at the very end is
// dropped (CRLF reads as LF); empty lines between records are skipped; a field starting with
// a quote is quoted, in which "" is a quote, a quote before a comma, LF or the end closes
// it, and any other quote is kept as text; other fields run to the next comma or LF, quotes
// and all. A record's row number is the line it starts on, as a spreadsheet program shows
// the file.
type csvSource struct {
	f     io.Closer // the upload, closed with the source
	br    *bufio.Reader
	lim   Limits
	line  int   // line of the next byte (1-based)
	used  int64 // bytes of the current record read so far
	field sheettype.Text
	keep  int // fields kept of each record (0: all); the ones past them are read over, not kept

	n     int
	cells []string
	long  []int
	err   error
}

// newCSVSource reads CSV text from r (a GB18030 CSV transcoded as it is read, see
// decoded); Close closes f.
func newCSVSource(r io.Reader, f io.Closer, lim Limits) *csvSource {
	br := bufio.NewReaderSize(r, 256<<10)
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte{0xEF, 0xBB, 0xBF}) {
		br.Discard(3) //nolint:errcheck
	}
	return &csvSource{f: f, br: br, lim: lim, line: 1, field: sheettype.NewText(lim.MaxCellChars)}
}

// next returns the next byte of the stream, CRs before LF and at the end dropped.
func (s *csvSource) next() (byte, bool, error) {
	c, err := s.br.ReadByte()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, false, nil
		}
		return 0, false, err
	}
	s.used++
	if c == '\r' {
		nx, err := s.br.Peek(1)
		switch {
		case len(nx) == 1 && nx[0] == '\n':
			s.br.Discard(1) //nolint:errcheck
			s.used++
			c = '\n'
		case len(nx) == 0 && errors.Is(err, io.EOF):
			return 0, false, nil
		case len(nx) == 0:
			return 0, false, err
		}
	}
	if s.used > s.lim.MaxRowBytes {
		return 0, false, errSpan
	}
	return c, true, nil
}

// Next reads the next record.
func (s *csvSource) Next() bool {
	if s.err != nil {
		return false
	}
	ok, err := s.readRecord()
	if err != nil {
		var fp *sheettype.Error
		switch {
		case errors.As(err, &fp):
			s.err = fp
		case errors.Is(err, errSpan):
			s.err = sheettype.Errorf(sheettype.RowTooLarge,
				"row %d holds more than %s; a spreadsheet row is far smaller, so the file is damaged or a quote (\") opened in that row is never closed",
				s.n, sheettype.LimitWords(s.lim.MaxRowBytes))
		default:
			s.err = fmt.Errorf("read csv: %w", err)
		}
		return false
	}
	return ok
}

func (s *csvSource) readRecord() (bool, error) {
	s.used = 0
	var (
		c   byte
		ok  bool
		err error
	)
	for { // empty lines between records are skipped
		if c, ok, err = s.next(); err != nil || !ok {
			return false, err
		}
		if c != '\n' {
			break
		}
		s.line++
		s.used = 0
	}
	s.n = s.line
	cells := make([]string, 0, max(len(s.cells), 8))
	var long []int
	for fields := 0; ; fields++ { // one field per turn; c is its first byte unless ok is false (end of input)
		if fields >= s.lim.MaxColumns {
			return false, sheettype.OverColumnLimit(s.n, s.lim)
		}
		s.field.Reset()
		endRecord := false
		if ok && c == '"' {
			if endRecord, err = s.readQuoted(); err != nil {
				return false, err
			}
		} else {
			for ok && c != ',' && c != '\n' {
				s.field.AddByte(c)
				if c, ok, err = s.next(); err != nil {
					return false, err
				}
			}
			if !ok || c == '\n' {
				if ok {
					s.line++
				}
				endRecord = true
			}
		}
		if s.keep <= 0 || fields < s.keep {
			if s.field.Cut() {
				long = append(long, len(cells))
			}
			cells = append(cells, string(s.field.Bytes()))
		}
		if endRecord {
			s.cells, s.long = cells, long
			return true, nil
		}
		if c, ok, err = s.next(); err != nil { // the byte after the comma
			return false, err
		}
	}
}

// readQuoted reads a quoted field after its opening quote, up to the comma or line end after
// its closing quote, or the end of the input; endRecord says the record ends with it.
func (s *csvSource) readQuoted() (endRecord bool, err error) {
	for {
		c, ok, err := s.next()
		if err != nil {
			return false, err
		}
		if !ok {
			return true, nil
		}
		switch c {
		case '"':
			if c, ok, err = s.next(); err != nil {
				return false, err
			}
			switch {
			case !ok:
				return true, nil
			case c == '"':
				s.field.AddByte('"')
			case c == ',':
				return false, nil
			case c == '\n':
				s.line++
				return true, nil
			default: // a stray quote is text
				s.field.AddByte('"')
				s.field.AddByte(c)
			}
		case '\n':
			s.line++
			s.field.AddByte('\n')
		default:
			s.field.AddByte(c)
		}
	}
}

func (s *csvSource) keepColumns(n int)    { s.keep = n }
func (s *csvSource) Row() (int, []string) { return s.n, s.cells }
func (s *csvSource) Long() []int          { return s.long }
func (s *csvSource) Err() error           { return s.err }
func (s *csvSource) Close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}
