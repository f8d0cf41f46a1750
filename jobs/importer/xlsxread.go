package importer

import (
	"archive/zip"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"
)

// xlsxSource streams a worksheet straight from the zip with encoding/xml's RawToken: no
// reflection per cell and little garbage, which makes it several times cheaper than
// excelize's row iterator on large sheets. Cell values are the raw stored values, as
// excelize's RawCellValue option gives them: shared and inline strings (rich-text runs
// joined, phonetic runs skipped), numbers as written, booleans as 0/1. The differential test
// checks it against excelize on files from several producers.
type xlsxSource struct {
	zr    *zip.ReadCloser
	sheet io.ReadCloser
	dec   *xml.Decoder
	sst   *sharedStrings

	n     int      // current row number
	cells []string // current row
	next  int      // number of the row read ahead (0: none)
	ahead []string // its cells
	done  bool
	err   error
}

func openXLSX(p, sheet string, lim Limits, tmpDir string) (*xlsxSource, error) {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return nil, problem(Invalid, "damaged_file", "the .xlsx file cannot be read (%v); save it again from your spreadsheet program", err)
	}
	s := &xlsxSource{zr: zr}
	if err := s.open(sheet, tmpDir); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *xlsxSource) open(sheet, tmpDir string) error {
	entries := map[string]*zip.File{}
	for _, f := range s.zr.File {
		entries[strings.ToLower(f.Name)] = f
	}
	byName := map[string]*zip.File{}
	for _, f := range s.zr.File {
		byName[f.Name] = f
	}
	sheets, err := workbookSheets(byName)
	if err != nil {
		return problem(Invalid, "damaged_file", "the workbook's sheet list cannot be read (%v)", err)
	}
	var target string
	for _, sh := range sheets {
		if sh.name == sheet || (sheet == "" && target == "") {
			target = sh.path
		}
	}
	zf := entries[strings.ToLower(target)]
	if zf == nil {
		return problem(Invalid, "sheet_not_found", "the sheet %q is not in the workbook", sheet)
	}
	if sst := sharedStringsEntry(byName, entries); sst != nil {
		if s.sst, err = loadSharedStrings(sst, tmpDir); err != nil {
			return problem(Invalid, "damaged_file", "the workbook's shared strings cannot be read (%v)", err)
		}
	}
	if s.sheet, err = zf.Open(); err != nil {
		return problem(Invalid, "damaged_file", "the sheet cannot be read (%v)", err)
	}
	s.dec = xml.NewDecoder(s.sheet)
	return nil
}

// sharedStringsEntry finds the shared string table through the workbook's relationships,
// falling back to the usual path.
func sharedStringsEntry(byName, lower map[string]*zip.File) *zip.File {
	var rels struct {
		Rels []struct {
			Type   string `xml:"Type,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if zf := byName["xl/_rels/workbook.xml.rels"]; zf != nil && decodeEntry(zf, &rels) == nil {
		for _, r := range rels.Rels {
			if strings.HasSuffix(r.Type, "/sharedStrings") {
				t := strings.TrimPrefix(r.Target, "/")
				if !strings.HasPrefix(t, "xl/") {
					t = path.Join("xl", t)
				}
				if zf := lower[strings.ToLower(t)]; zf != nil {
					return zf
				}
			}
		}
	}
	return lower["xl/sharedstrings.xml"]
}

// Next advances one row. Rows the sheet skips come back empty, so row numbers stay the
// spreadsheet's.
func (s *xlsxSource) Next() bool {
	if s.err != nil {
		return false
	}
	if s.next == 0 && !s.done {
		s.next, s.ahead, s.err = s.readRow(s.n + 1)
		if s.err != nil {
			s.err = problem(Invalid, "damaged_file", "the file is damaged near row %d (%v)", s.n+1, s.err)
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
		s.cells = nil
		return true
	}
	s.cells, s.next, s.ahead = s.ahead, 0, nil
	return true
}

// readRow reads the next <row> element; its number defaults to want when it has no r.
func (s *xlsxSource) readRow(want int) (int, []string, error) {
	for {
		tok, err := s.dec.RawToken()
		if err == io.EOF {
			return 0, nil, nil
		}
		if err != nil {
			return 0, nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local != "row" {
				continue
			}
			num := want
			if r := attr(t, "r"); r != "" {
				n, err := strconv.Atoi(r)
				if err != nil || n < 1 || n > excelize.TotalRows {
					return 0, nil, fmt.Errorf("bad row number %q", r)
				}
				if n < want {
					return 0, nil, fmt.Errorf("row %d comes after row %d", n, want-1)
				}
				num = n
			}
			cells, err := s.readCells()
			return num, cells, err
		case xml.EndElement:
			if t.Name.Local == "sheetData" {
				return 0, nil, nil
			}
		}
	}
}

// readCells reads the cells of one row, up to </row>.
func (s *xlsxSource) readCells() ([]string, error) {
	var (
		cells  []string
		col    = -1
		typ    string
		text   strings.Builder
		inText bool // inside <v>, or <t> of an inline string
		inPh   bool // inside a phonetic run, whose text is not part of the value
		hasVal bool
	)
	for {
		tok, err := s.dec.RawToken()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "c":
				col++
				if r := attr(t, "r"); r != "" {
					c, _, err := excelize.CellNameToCoordinates(r)
					if err != nil {
						return nil, fmt.Errorf("bad cell reference %q", r)
					}
					col = c - 1
				}
				typ = attr(t, "t")
				text.Reset()
				hasVal = false
			case "v":
				inText, hasVal = true, true
			case "t":
				if !inPh {
					inText, hasVal = true, true
				}
			case "rPh":
				inPh = true
			}
		case xml.CharData:
			if inText {
				text.Write(t)
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "v", "t":
				inText = false
			case "rPh":
				inPh = false
			case "c":
				if !hasVal {
					continue
				}
				v, err := s.value(typ, text.String())
				if err != nil {
					return nil, err
				}
				if v == "" {
					continue
				}
				for len(cells) < col {
					cells = append(cells, "")
				}
				cells = append(cells, v)
			case "row":
				return cells, nil
			}
		}
	}
}

func (s *xlsxSource) value(typ, raw string) (string, error) {
	if typ != "s" {
		return raw, nil // n, str, inlineStr, b, d, e: the stored text
	}
	i, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("bad shared string index %q", raw)
	}
	if s.sst == nil {
		return "", fmt.Errorf("shared string %d referenced but the workbook has none", i)
	}
	return s.sst.get(i)
}

func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (s *xlsxSource) Row() (int, []string) { return s.n, s.cells }
func (s *xlsxSource) Err() error           { return s.err }
func (s *xlsxSource) Close() error {
	if s.sheet != nil {
		s.sheet.Close()
	}
	if s.sst != nil {
		s.sst.close()
	}
	return s.zr.Close()
}

// sharedStrings is a workbook's shared string table, held as one blob and an offset per
// string (4 bytes each, not a Go string header). Past a size it spills to a temp file, so a
// sheet of millions of unique strings does not grow the heap by their text.
type sharedStrings struct {
	ends []uint32 // end offset of each string in the blob
	blob []byte   // in memory, or
	file *os.File // on disk
}

// spillAt is the blob size beyond which shared strings move to a temp file.
const spillAt = 32 << 20

func loadSharedStrings(zf *zip.File, tmpDir string) (*sharedStrings, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	sst := &sharedStrings{}
	var (
		w      io.Writer
		buf    []byte
		size   uint32
		inSI   bool
		inT    bool
		inPh   bool
		dec    = xml.NewDecoder(rc)
		onDisk = zf.UncompressedSize64 > spillAt
	)
	if onDisk {
		if sst.file, err = os.CreateTemp(tmpDir, "sst-*"); err != nil {
			return nil, err
		}
		os.Remove(sst.file.Name()) // unlinked: it disappears with the handle
		w = sst.file
	}
	for {
		tok, err := dec.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			sst.close()
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "si":
				inSI = true
			case "t":
				inT = inSI && !inPh
			case "rPh":
				inPh = true
			}
		case xml.CharData:
			if inT {
				if onDisk {
					if _, err := w.Write(t); err != nil {
						sst.close()
						return nil, err
					}
				} else {
					buf = append(buf, t...)
				}
				size += uint32(len(t))
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "t":
				inT = false
			case "rPh":
				inPh = false
			case "si":
				inSI = false
				sst.ends = append(sst.ends, size)
			}
		}
	}
	sst.blob = buf
	return sst, nil
}

func (s *sharedStrings) get(i int) (string, error) {
	if i < 0 || i >= len(s.ends) {
		return "", fmt.Errorf("shared string %d does not exist (the table has %d)", i, len(s.ends))
	}
	var start uint32
	if i > 0 {
		start = s.ends[i-1]
	}
	if s.file == nil {
		return string(s.blob[start:s.ends[i]]), nil
	}
	b := make([]byte, s.ends[i]-start)
	if _, err := s.file.ReadAt(b, int64(start)); err != nil {
		return "", err
	}
	return string(b), nil
}

func (s *sharedStrings) close() {
	if s.file != nil {
		s.file.Close()
	}
}
