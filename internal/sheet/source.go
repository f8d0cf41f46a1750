package sheet

import (
	"io"

	"github.com/taskcenter/taskcenter/internal/sheet/xls"
)

// source streams a sheet's rows: the reader of each format implements it.
type source interface {
	Next() bool
	Row() (int, []string)
	Long() []int
	Err() error
	Close() error
}

var (
	_ source = (*csvSource)(nil)
	_ source = (*xlsxSource)(nil)
	_ source = (*xls.Sheet)(nil)
)

// columnKeeper is a source that can skip the cells past the columns its reader needs.
type columnKeeper interface{ keepColumns(n int) }

var (
	_ columnKeeper = (*csvSource)(nil)
	_ columnKeeper = (*xlsxSource)(nil)
)

// File is a stored file to read: a workbook is read through ReadAt, a CSV through Read.
type File interface {
	io.Reader
	io.ReaderAt
	io.Closer
	Size() int64
}

// Reader streams a sheet's rows with their spreadsheet row numbers (header = 1). Memory
// does not grow with the file: rows are read one at a time, and each is bounded by Limits.
// Each row's cells slice is new, so callers may keep it.
type Reader struct {
	src source
}

// Open opens the sheet an Inspection chose in f for streaming: a workbook through random
// access (ReadAt), a CSV in one sequential read in the encoding the Inspection resolved.
// A workbook's shared strings too many to hold in memory go to an unlinked file in tmpDir.
// The Reader closes f; on error the caller does.
func Open(f File, ins Inspection, lim Limits, tmpDir string) (*Reader, error) {
	switch ins.Format {
	case CSV:
		return &Reader{newCSVSource(decoded(f, ins.Encoding), f, lim.WithDefaults())}, nil
	case XLS:
		s, err := openXLS(f, f.Size(), ins.Sheet, lim, tmpDir)
		if err != nil {
			return nil, err
		}
		return &Reader{xlsUpload{s, f}}, nil
	}
	s, err := newXLSXSource(f, f.Size(), ins.Sheet, lim, tmpDir)
	if err != nil {
		return nil, err
	}
	s.file = f
	return &Reader{s}, nil
}

// openXLS opens sheet (empty: the first) of the .xls in the size bytes of r, for its rows;
// its shared strings too many to hold in memory go to an unlinked file in tmpDir.
func openXLS(r io.ReaderAt, size int64, sheet string, lim Limits, tmpDir string) (*xls.Sheet, error) {
	bk, err := xls.Open(r, size, lim, xlsStrings(tmpDir))
	if err != nil {
		return nil, err
	}
	s, err := bk.Sheet(sheet)
	if err != nil {
		bk.Close()
		return nil, err
	}
	return s, nil
}

// xlsStrings makes the tables an .xls's shared strings are read into: the ones an .xlsx's
// go to, spilling to tmpDir.
func xlsStrings(tmpDir string) func() xls.Strings {
	return func() xls.Strings { return &sharedStrings{tmpDir: tmpDir} }
}

// xlsUpload is a sheet of an uploaded .xls: closing it closes the upload too.
type xlsUpload struct {
	*xls.Sheet
	file io.Closer
}

func (u xlsUpload) Close() error {
	u.Sheet.Close() //nolint:errcheck // always nil
	u.file.Close()  //nolint:errcheck // dropped, as the .xls reader always has: the rows are read by then
	return nil
}

// Next advances to the next row; false at the end or on error. Rows the sheet skips come
// back empty, so row numbers stay the spreadsheet's.
func (r *Reader) Next() bool { return r.src.Next() }

// Row returns the current row's number and cells (raw values, not display formats).
func (r *Reader) Row() (int, []string) { return r.src.Row() }

// KeepColumns makes the rows read after it hold at most their first n columns: the cells
// further right are passed over without being decoded. In an .xlsx their text is not
// unescaped or checked and no shared string is looked up, so a row thousands of cells wide
// costs what its used columns cost, and a damaged cell past them neither costs nor fails; a
// CSV's fields past them are read over and not kept. An .xls row has at most 256 columns and
// is read whole. n ≤ 0 keeps every column.
func (r *Reader) KeepColumns(n int) {
	if k, ok := r.src.(columnKeeper); ok {
		k.keepColumns(n)
	}
}

// Long lists the columns (0-based, ascending) of the current row whose text was longer
// than Limits.MaxCellChars: their cells hold only the first MaxCellChars characters.
func (r *Reader) Long() []int { return r.src.Long() }

// Err is the error that ended reading, nil at the end of the sheet.
func (r *Reader) Err() error { return r.src.Err() }

// Close closes the reader and the file it reads.
func (r *Reader) Close() error { return r.src.Close() }
