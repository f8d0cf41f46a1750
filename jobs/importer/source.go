package importer

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
)

// source streams a sheet's rows with their spreadsheet row numbers (header = 1). Memory
// does not grow with the file: rows are read one at a time. Each row's cells slice is new,
// so callers may keep it.
type source interface {
	// Next advances to the next row; false at the end or on error.
	Next() bool
	// Row returns the current row's number and cells (raw values, not display formats).
	Row() (int, []string)
	Err() error
	Close() error
}

// openSource opens the file for streaming.
func openSource(p string, ins Inspection, lim Limits, tmpDir string) (source, error) {
	if ins.Format == CSV {
		return openCSV(p)
	}
	return openXLSX(p, ins.Sheet, lim, tmpDir)
}

type csvSource struct {
	f     *os.File
	r     *csv.Reader
	n     int
	cells []string
	err   error
}

func openCSV(p string) (*csvSource, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 256<<10)
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte{0xEF, 0xBB, 0xBF}) {
		br.Discard(3) //nolint:errcheck
	}
	r := csv.NewReader(br)
	r.FieldsPerRecord = -1 // rows may be short or long
	r.LazyQuotes = true
	return &csvSource{f: f, r: r}, nil
}

func (s *csvSource) Next() bool {
	if s.err != nil {
		return false
	}
	rec, err := s.r.Read()
	if err == io.EOF {
		return false
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			s.err = problem(Invalid, "damaged_file", "the CSV cannot be read at line %d: %v", pe.Line, pe.Err)
		} else {
			s.err = fmt.Errorf("read csv: %w", err)
		}
		return false
	}
	// Row numbers are line numbers, as a spreadsheet program shows them: blank lines count.
	s.n, _ = s.r.FieldPos(0)
	s.cells = rec
	return true
}

func (s *csvSource) Row() (int, []string) { return s.n, s.cells }
func (s *csvSource) Err() error           { return s.err }
func (s *csvSource) Close() error         { return s.f.Close() }
