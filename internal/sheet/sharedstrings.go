package sheet

import (
	"fmt"
	"os"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
	"github.com/taskcenter/taskcenter/internal/sheet/xls"
)

// sharedStrings is a workbook's shared string table, .xlsx (loadSharedStrings) or .xls
// (xls.Open), held as one blob and an end offset per string (4 bytes each, in fixed chunks
// so growing never copies). Past spillAt the blob moves to an unlinked temp file in tmpDir,
// so a sheet of millions of unique strings does not grow the heap by their text. Each
// string keeps at most MaxCellChars characters; the ones cut are remembered, so their cells
// are flagged too.
type sharedStrings struct {
	tmpDir string
	ends   [][]uint32 // end offset of each string in the blob, sstChunk per slice
	count  int
	long   map[int]bool
	blob   []byte   // in memory, or
	file   *os.File // on disk
	size   uint64   // bytes in the blob
}

var _ xls.Strings = (*sharedStrings)(nil)

const (
	// spillAt is the blob size beyond which shared strings move to a temp file.
	spillAt  = 32 << 20
	sstChunk = 1 << 16
)

// Add appends a string; cut says it was cut at MaxCellChars.
func (s *sharedStrings) Add(text []byte, cut bool) error {
	if s.size+uint64(len(text)) > 1<<32-1 {
		return sheettype.Errorf(sheettype.DamagedFile, "the workbook's shared strings hold more than 4 GB of text")
	}
	if s.file == nil && s.size+uint64(len(text)) > spillAt {
		f, err := os.CreateTemp(s.tmpDir, "sst-*")
		if err != nil {
			return err
		}
		os.Remove(f.Name()) // unlinked: it disappears with the handle
		if _, err := f.Write(s.blob); err != nil {
			f.Close()
			return err
		}
		s.file, s.blob = f, nil
	}
	if s.file != nil {
		if _, err := s.file.Write(text); err != nil {
			return err
		}
	} else {
		s.blob = append(s.blob, text...)
	}
	s.size += uint64(len(text))
	if cut {
		if s.long == nil {
			s.long = map[int]bool{}
		}
		s.long[s.count] = true
	}
	if s.count%sstChunk == 0 {
		s.ends = append(s.ends, make([]uint32, 0, sstChunk))
	}
	last := len(s.ends) - 1
	s.ends[last] = append(s.ends[last], uint32(s.size))
	s.count++
	return nil
}

func (s *sharedStrings) end(i int) uint32 { return s.ends[i/sstChunk][i%sstChunk] }

// Get returns string i and whether it was cut at MaxCellChars.
func (s *sharedStrings) Get(i int) (string, bool, error) {
	if i < 0 || i >= s.count {
		return "", false, fmt.Errorf("shared string %d does not exist (the table has %d)", i, s.count)
	}
	var start uint32
	if i > 0 {
		start = s.end(i - 1)
	}
	end := s.end(i)
	if s.file == nil {
		return string(s.blob[start:end]), s.long[i], nil
	}
	b := make([]byte, end-start)
	if _, err := s.file.ReadAt(b, int64(start)); err != nil {
		return "", false, err
	}
	return string(b), s.long[i], nil
}

// Len is the number of strings added.
func (s *sharedStrings) Len() int { return s.count }

// Close removes the temp file, if the table spilled to one.
func (s *sharedStrings) Close() {
	if s.file != nil {
		s.file.Close()
	}
}
