package xlsxsafe

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/xuri/excelize/v2"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// ContentTypeXLSX is the media type of the workbooks Writer makes.
const ContentTypeXLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// Limits of a sheet: excelize refuses a row wider or a cell longer, so Writer keeps within
// them whatever it is given.
const (
	// MaxColumns is the most columns a sheet has (A to XFD).
	MaxColumns = 16_384
	// MaxCellChars is the most characters a cell holds.
	MaxCellChars = 32_767
)

// Writer streams rows into a new .xlsx that users will open: a frozen header row, every
// text cell neutralised, written through excelize's StreamWriter to a local scratch file
// (storage.Store.CreateTemp) and stored whole by Commit (a rename locally, an upload to
// S3). Close discards an uncommitted file. Each sheet declares the range of the cells written
// to it as its dimension.
// A row is always writable: columns past MaxColumns are dropped and text past MaxCellChars
// characters is cut and ends with "…", so user data can never make the write fail.
type Writer struct {
	files     storage.Store
	tmp       *os.File
	book      *excelize.File
	sw        *excelize.StreamWriter
	rows      int // data rows written, all sheets
	line      int // data rows on the current sheet
	committed bool

	// The current sheet's cells end at column cols of row last (0: no cell yet); a finished
	// sheet's range is kept in dims, by zip part, for dimensionZip.
	cols, last int
	dims       map[string]string
}

// NewWriter starts a workbook whose temp file name begins with prefix (a task number, so
// cleanup can tell whose partial file it is), with one sheet and its header row.
func NewWriter(fs storage.Store, prefix, sheet string, header []string) (*Writer, error) {
	tmp, err := fs.CreateTemp(prefix, ".xlsx")
	if err != nil {
		return nil, err
	}
	w := &Writer{files: fs, tmp: tmp, book: excelize.NewFile(excelize.Options{TmpDir: filepath.Dir(tmp.Name())}), dims: map[string]string{}}
	w.book.SetZipWriter(func(out io.Writer) excelize.ZipWriter { return newDimensionZip(out, w.dims, false) })
	if err := w.start(sheet, header); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (w *Writer) start(sheet string, header []string) error {
	if w.sw == nil && sheet != "Sheet1" {
		if err := w.book.SetSheetName("Sheet1", sheet); err != nil {
			return err
		}
	}
	sw, err := w.book.NewStreamWriter(sheet)
	if err != nil {
		return fmt.Errorf("start sheet: %w", err)
	}
	w.sw = sw
	w.cols, w.last = 0, 0
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return fmt.Errorf("freeze header: %w", err)
	}
	cells := make([]any, len(header))
	for i, h := range header {
		cells[i] = h
	}
	return w.put(1, cells)
}

// Row appends a data row to the current sheet. Text values are neutralised in place.
func (w *Writer) Row(values []any) error {
	w.rows++
	w.line++
	return w.put(w.line+1, values)
}

// NextSheet finishes the current sheet and starts another, with its own frozen header row;
// later rows go to it.
func (w *Writer) NextSheet(sheet string, header []string) error {
	if err := w.finishSheet(); err != nil {
		return err
	}
	if _, err := w.book.NewSheet(sheet); err != nil {
		return fmt.Errorf("add sheet %q: %w", sheet, err)
	}
	w.line = 0
	return w.start(sheet, header)
}

func (w *Writer) put(line int, values []any) error {
	if len(values) > MaxColumns {
		values = values[:MaxColumns]
	}
	for i, v := range values {
		if s, ok := v.(string); ok {
			values[i] = Neutralize(Clip(s))
		}
	}
	cell, _ := excelize.CoordinatesToCellName(1, line)
	if err := w.sw.SetRow(cell, values); err != nil {
		return fmt.Errorf("write row %d: %w", line, err)
	}
	// SetRow writes no cell for a nil value, so trailing nils do not widen the sheet.
	for n := len(values); n > 0; n-- {
		if values[n-1] != nil {
			w.cols, w.last = max(w.cols, n), line
			break
		}
	}
	return nil
}

// finishSheet ends the current sheet's stream and keeps the range its cells cover, which
// the workbook declares as the sheet's dimension when it is written.
func (w *Writer) finishSheet() error {
	if err := w.sw.Flush(); err != nil {
		return fmt.Errorf("finish sheet: %w", err)
	}
	ref := "A1" // no cell: what an empty sheet declares
	if w.last > 0 {
		ref = usedRange(1, 1, w.cols, w.last)
	}
	w.dims[sheetPart(w.sw.SheetID)] = ref
	return nil
}

// Rows is how many data rows have been written.
func (w *Writer) Rows() int { return w.rows }

// Commit finishes the workbook and stores it under key; it returns its size.
func (w *Writer) Commit(ctx context.Context, key string) (int64, error) {
	if err := w.finishSheet(); err != nil {
		return 0, err
	}
	if _, err := w.book.WriteTo(w.tmp); err != nil {
		return 0, fmt.Errorf("write workbook: %w", err)
	}
	info, err := w.files.Commit(ctx, w.tmp, key, ContentTypeXLSX)
	if err != nil {
		return 0, err
	}
	w.committed = true
	return info.Size, nil
}

// Flush finishes the workbook in its temp file and returns the file's path, for a file that
// is served once and not kept (Close deletes it). Commit is for files that are kept.
func (w *Writer) Flush() (string, error) {
	if err := w.finishSheet(); err != nil {
		return "", err
	}
	if _, err := w.book.WriteTo(w.tmp); err != nil {
		return "", fmt.Errorf("write workbook: %w", err)
	}
	if err := w.tmp.Sync(); err != nil {
		return "", err
	}
	return w.tmp.Name(), nil
}

// Close releases the workbook, deleting the temp file unless it was committed.
func (w *Writer) Close() {
	w.book.Close()
	if !w.committed {
		storage.Discard(w.tmp)
	}
}

// Clip cuts s to fit in a cell once neutralised (MaxCellChars characters, counted in UTF-16
// units as Excel counts them, with room for the apostrophe Neutralize may add), ending it
// with "…" when it was cut.
func Clip(s string) string {
	const room = MaxCellChars - 2 // the apostrophe and the ellipsis
	if len(s) <= room {
		return s // at most room bytes: at most room UTF-16 units
	}
	units := 0
	for i, r := range s {
		n := 1
		if r >= 0x10000 {
			n = 2
		}
		if units+n > room {
			return s[:i] + "…"
		}
		units += n
	}
	return s
}
