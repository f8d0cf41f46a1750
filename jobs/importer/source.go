package importer

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/xuri/excelize/v2"
)

// source streams a sheet's rows with their spreadsheet row numbers (header = 1). Memory
// does not grow with the file: one row is held at a time, and the cells slice may be reused
// by the next call, so callers copy what they keep.
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

type xlsxSource struct {
	book  *excelize.File
	rows  *excelize.Rows
	n     int
	cells []string
	err   error
}

func openXLSX(p, sheet string, lim Limits, tmpDir string) (*xlsxSource, error) {
	opts := excelize.Options{TmpDir: tmpDir}
	if lim.MaxUncompressed > 0 {
		opts.UnzipSizeLimit = lim.MaxUncompressed
	}
	book, err := excelize.OpenFile(p, opts)
	if err != nil {
		return nil, problem(Invalid, "damaged_file", "the .xlsx file cannot be read (%v); save it again from your spreadsheet program", err)
	}
	rows, err := book.Rows(sheet)
	if err != nil {
		book.Close()
		return nil, problem(Invalid, "sheet_not_found", "the sheet %q cannot be read: %v", sheet, err)
	}
	return &xlsxSource{book: book, rows: rows}, nil
}

func (s *xlsxSource) Next() bool {
	if s.err != nil || !s.rows.Next() {
		if s.err == nil {
			if err := s.rows.Error(); err != nil {
				s.err = s.damaged(err)
			}
		}
		return false
	}
	s.n++
	s.cells, s.err = s.rows.Columns(excelize.Options{RawCellValue: true})
	if s.err != nil {
		s.err = s.damaged(s.err)
		return false
	}
	return true
}

func (s *xlsxSource) damaged(err error) error {
	if errors.Is(err, excelize.ErrMaxRows) {
		return problem(Invalid, "too_many_rows", "the sheet has more rows than an .xlsx file may hold")
	}
	return problem(Invalid, "damaged_file", "the file is damaged near row %d (%v)", s.n+1, err)
}

func (s *xlsxSource) Row() (int, []string) { return s.n, s.cells }
func (s *xlsxSource) Err() error           { return s.err }
func (s *xlsxSource) Close() error {
	s.rows.Close()
	return s.book.Close()
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
	r.ReuseRecord = true
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
