package xlsxsafe

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/xuri/excelize/v2"
)

// A worksheet's <dimension ref> declares the range of its cells, and readers that trust it
// (openpyxl in read-only mode, the usual way to open a large file in Python) read no cell
// outside it. excelize leaves it at "A1": its StreamWriter writes the element before the
// first row and never comes back to it, and an in-memory sheet keeps the "A1" of the sheet
// template. So every workbook taskcenter writes is saved through dimensionZip (excelize's
// File.SetZipWriter), which sets each worksheet's dimension while excelize copies the sheet
// into the zip: a streamed sheet, which can hold hundreds of thousands of rows, is neither
// read twice nor held in memory for it.

// SetDimensions makes book, built in memory (no StreamWriter), declare in each worksheet's
// dimension the range of the cells it holds when it is written. Writer does this for its
// streamed sheets.
func SetDimensions(book *excelize.File) {
	book.SetZipWriter(func(w io.Writer) excelize.ZipWriter { return newDimensionZip(w, nil, true) })
}

// sheetPart is the zip part of the worksheet excelize numbers id: every sheet excelize adds
// to a workbook it created is named after its sheet id.
func sheetPart(id int) string { return fmt.Sprintf("xl/worksheets/sheet%d.xml", id) }

// usedRange is the reference of the cells from column c1, row r1 to column c2, row r2: a
// single cell is named alone, as Excel writes it.
func usedRange(c1, r1, c2, r2 int) string {
	from, _ := excelize.CoordinatesToCellName(c1, r1)
	if c1 == c2 && r1 == r2 {
		return from
	}
	to, _ := excelize.CoordinatesToCellName(c2, r2)
	return from + ":" + to
}

// dimensionZip is the zip writer excelize saves a workbook through. The worksheets named in
// known get that range, set in the bytes as they pass (a streamed sheet can be far too large
// to hold, and its range is known by whoever wrote it); with measure, any other worksheet is
// held until it ends and gets the range of its cells (excelize holds such a sheet whole in
// memory already).
type dimensionZip struct {
	zw      *zip.Writer
	known   map[string]string
	measure bool
	entry   interface{ end() error } // the part being written, if it has to be finished
	seen    map[string]bool
}

func newDimensionZip(w io.Writer, known map[string]string, measure bool) *dimensionZip {
	zw := zip.NewWriter(w)
	zw.RegisterCompressor(zip.Deflate, fastDeflate)
	return &dimensionZip{zw: zw, known: known, measure: measure, seen: map[string]bool{}}
}

// fastDeflate compresses a workbook's parts at flate.BestSpeed rather than archive/zip's
// level 5: compressing the sheet was the largest cost of an export beyond excelize's own
// work (a 100,000-row sheet of 48 MB of XML: 0.43–0.68 s at level 1, 1.3–1.8 s at level 5,
// measured side by side), for a file 17 % larger (4.4 MB instead of 3.8 MB).
func fastDeflate(w io.Writer) (io.WriteCloser, error) {
	return flate.NewWriter(w, flate.BestSpeed)
}

func (z *dimensionZip) Create(name string) (io.Writer, error) {
	if err := z.endEntry(); err != nil {
		return nil, err
	}
	w, err := z.zw.Create(name)
	if err != nil {
		return nil, err
	}
	if ref, ok := z.known[name]; ok {
		z.seen[name] = true
		d := &dimensionSetter{w: w, ref: ref}
		z.entry = d
		return d, nil
	}
	if z.measure && isWorksheet(name) {
		m := &measuredSheet{w: w}
		z.entry = m
		return m, nil
	}
	return w, nil
}

func (z *dimensionZip) AddFS(fsys fs.FS) error {
	if err := z.endEntry(); err != nil {
		return err
	}
	return z.zw.AddFS(fsys)
}

func (z *dimensionZip) Close() error {
	if err := z.endEntry(); err != nil {
		_ = z.zw.Close()
		return err
	}
	for name := range z.known {
		if !z.seen[name] {
			// The sheet is saved under another name than sheetPart gives: its dimension
			// would be left wrong, so the workbook is refused rather than stored.
			_ = z.zw.Close()
			return fmt.Errorf("xlsxsafe: worksheet %s is not in the workbook written", name)
		}
	}
	return z.zw.Close()
}

func (z *dimensionZip) endEntry() error {
	if z.entry == nil {
		return nil
	}
	e := z.entry
	z.entry = nil
	return e.end()
}

func isWorksheet(name string) bool {
	rest, ok := strings.CutPrefix(name, "xl/worksheets/")
	return ok && strings.HasSuffix(rest, ".xml") && !strings.Contains(rest, "/")
}

// maxHead bounds what dimensionSetter holds back looking for the element: it comes right
// after the worksheet's start tag and sheetPr, long before this.
const maxHead = 64 << 10

// dimensionSetter passes a worksheet through, setting the ref of its dimension element to
// ref. Only the bytes up to the end of that element are held back.
type dimensionSetter struct {
	w    io.Writer
	ref  string
	head []byte
	done bool
}

func (d *dimensionSetter) Write(p []byte) (int, error) {
	if d.done {
		return d.w.Write(p)
	}
	d.head = append(d.head, p...)
	out, settled := setDimension(d.head, d.ref)
	if !settled && len(d.head) < maxHead {
		return len(p), nil
	}
	d.done, d.head = true, nil
	if _, err := d.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (d *dimensionSetter) end() error {
	if d.done {
		return nil
	}
	out, _ := setDimension(d.head, d.ref)
	d.done, d.head = true, nil
	_, err := d.w.Write(out)
	return err
}

// measuredSheet holds a worksheet until it ends, then writes it with the range of its cells
// as its dimension.
type measuredSheet struct {
	w   io.Writer
	buf bytes.Buffer
}

func (m *measuredSheet) Write(p []byte) (int, error) { return m.buf.Write(p) }

func (m *measuredSheet) end() error {
	out := m.buf.Bytes()
	if ref, ok := cellRange(out); ok {
		out, _ = setDimension(out, ref)
	}
	_, err := m.w.Write(out)
	return err
}

// cellRange is the range of the cells of a worksheet; false when it has none, or has a cell
// without a reference (excelize always writes one), which would leave the range unsure.
func cellRange(sheet []byte) (string, bool) {
	dec := xml.NewDecoder(bytes.NewReader(sheet))
	c1, r1, c2, r2 := 0, 0, 0, 0
	for {
		tok, err := dec.RawToken()
		if err != nil {
			break // io.EOF, or XML that is not well formed: what was read decides
		}
		if el, ok := tok.(xml.EndElement); ok && el.Name.Local == "sheetData" {
			break
		}
		el, ok := tok.(xml.StartElement)
		if !ok || el.Name.Local != "c" {
			continue
		}
		ref := ""
		for _, a := range el.Attr {
			if a.Name.Local == "r" && a.Name.Space == "" {
				ref = a.Value
			}
		}
		col, row, err := excelize.CellNameToCoordinates(ref)
		if err != nil {
			return "", false
		}
		if c1 == 0 {
			c1, r1, c2, r2 = col, row, col, row
			continue
		}
		c1, r1, c2, r2 = min(c1, col), min(r1, row), max(c2, col), max(r2, row)
	}
	if c1 == 0 {
		return "", false
	}
	return usedRange(c1, r1, c2, r2), true
}

// setDimension returns head, the start of a worksheet, with the ref of its dimension element
// set to ref (every other byte as it was), and whether that is settled: the element was
// found, or the sheet's data began without one (the sheet is then left as it is). When it is
// not settled, head ends before the element could be told.
func setDimension(head []byte, ref string) ([]byte, bool) {
	data := bytes.Index(head, []byte("<sheetData"))
	at := -1
	for from := 0; ; {
		i := bytes.Index(head[from:], []byte("<dimension"))
		if i < 0 {
			break
		}
		i += from
		if data >= 0 && i > data {
			break
		}
		next := i + len("<dimension")
		if next == len(head) {
			return head, false
		}
		if c := head[next]; isSpace(c) || c == '/' || c == '>' {
			at = i
			break
		}
		from = next // <dimensionSomething>: another element
	}
	if at < 0 {
		return head, data >= 0
	}
	end := bytes.IndexByte(head[at:], '>')
	if end < 0 {
		return head, false
	}
	start, stop, ok := refValue(head[at : at+end])
	if !ok {
		return head, true // no ref to set: not an element excelize writes
	}
	out := make([]byte, 0, len(head)-(stop-start)+len(ref))
	out = append(out, head[:at+start]...)
	out = append(out, ref...)
	out = append(out, head[at+stop:]...)
	return out, true
}

// refValue finds the value of the ref attribute in tag, a start tag without its closing
// '>': the offsets of its first byte and of the byte after it.
func refValue(tag []byte) (int, int, bool) {
	for i := len("<dimension") + 1; i < len(tag); i++ {
		if !isSpace(tag[i-1]) || !bytes.HasPrefix(tag[i:], []byte("ref")) {
			continue
		}
		j := skipSpace(tag, i+len("ref"))
		if j >= len(tag) || tag[j] != '=' {
			continue
		}
		j = skipSpace(tag, j+1)
		if j >= len(tag) || (tag[j] != '"' && tag[j] != '\'') {
			return 0, 0, false
		}
		k := bytes.IndexByte(tag[j+1:], tag[j])
		if k < 0 {
			return 0, 0, false
		}
		return j + 1, j + 1 + k, true
	}
	return 0, 0, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}
