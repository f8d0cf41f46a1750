package importer

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// source streams a sheet's rows with their spreadsheet row numbers (header = 1). Memory
// does not grow with the file: rows are read one at a time, and each is bounded by Limits.
// Each row's cells slice is new, so callers may keep it.
type source interface {
	// Next advances to the next row; false at the end or on error.
	Next() bool
	// Row returns the current row's number and cells (raw values, not display formats).
	Row() (int, []string)
	// Long lists the columns (0-based, ascending) of the current row whose text was longer
	// than Limits.MaxCellChars: their cells hold only the first MaxCellChars characters.
	Long() []int
	Err() error
	Close() error
}

// openSource opens a stored upload for streaming: a workbook through random access (ReadAt),
// a CSV in one sequential read. The source closes obj; on error the caller does.
func openSource(obj storage.Object, ins Inspection, lim Limits, tmpDir string) (source, error) {
	switch ins.Format {
	case CSV:
		return newCSVSource(decoded(obj, ins.Encoding), obj, lim.withDefaults()), nil
	case XLS:
		s, err := newXLSSource(obj, obj.Size(), ins.Sheet, lim, tmpDir)
		if err != nil {
			return nil, err
		}
		s.book.file = obj
		return s, nil
	}
	s, err := newXLSXSource(obj, obj.Size(), ins.Sheet, lim, tmpDir)
	if err != nil {
		return nil, err
	}
	s.file = obj
	return s, nil
}

// watchedObject is a stored upload that remembers the first read error of the store itself.
// A parser reports a read that failed half-way as a damaged file; when the store failed
// (the network, an S3 gateway restarting), that is a transient fault to retry, not bad input.
type watchedObject struct {
	storage.Object
	mu  sync.Mutex
	err error
}

func (w *watchedObject) Read(p []byte) (int, error) {
	n, err := w.Object.Read(p)
	w.note(err)
	return n, err
}

func (w *watchedObject) ReadAt(p []byte, off int64) (int, error) {
	n, err := w.Object.ReadAt(p, off)
	w.note(err)
	return n, err
}

func (w *watchedObject) note(err error) {
	if err == nil || errors.Is(err, io.EOF) {
		return
	}
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// badFile turns a file problem into bad input, unless reading the upload failed, which stays
// transient like anything else.
func (w *watchedObject) badFile(err error) error {
	w.mu.Lock()
	fault := w.err
	w.mu.Unlock()
	if fault != nil {
		return fmt.Errorf("read the upload: %w", fault)
	}
	return badFile(err)
}
