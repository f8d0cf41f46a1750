package sheet

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// piece is bytes repeated times (once when times is 0) in a part being built.
type piece struct {
	b     []byte
	times int64
}

func text(s string) piece { return piece{b: []byte(s)} }

// repeat is s repeated until it makes n bytes (n a multiple of len(s), and of 1 MiB when
// it is larger; len(s) a power of two up to 1 KiB).
func repeat(s string, n int64) piece {
	const chunk = 1 << 20
	if n >= chunk {
		if chunk%len(s) != 0 || n%chunk != 0 {
			panic("repeat: sizes do not divide")
		}
		return piece{b: []byte(strings.Repeat(s, chunk/len(s))), times: n / chunk}
	}
	return piece{b: []byte(strings.Repeat(s, int(n)/len(s)))}
}

// deflate compresses the pieces into one raw deflate stream. Each piece is compressed once
// and its sync-flushed, byte-aligned output repeated, so a gigabyte of 'A' costs
// milliseconds and a megabyte of output. It returns the stream, the CRC-32 and the size of
// the uncompressed content.
func deflate(t testing.TB, pieces ...piece) ([]byte, uint32, uint64) {
	t.Helper()
	var out bytes.Buffer
	var crc uint32
	var size uint64
	for _, p := range pieces {
		var block bytes.Buffer
		fw, _ := flate.NewWriter(&block, flate.BestCompression)
		fw.Write(p.b) //nolint:errcheck
		if err := fw.Flush(); err != nil {
			t.Fatal(err)
		}
		for range max(p.times, 1) {
			out.Write(block.Bytes())
			crc = crc32.Update(crc, crc32.IEEETable, p.b)
			size += uint64(len(p.b))
		}
	}
	fw, _ := flate.NewWriter(&out, flate.BestCompression)
	fw.Close() // the final, empty block
	return out.Bytes(), crc, size
}

// part is one file of a zip being built; declare, when set, is the uncompressed size its
// headers claim instead of the real one.
type part struct {
	name    string
	pieces  []piece
	declare uint64
}

// zipOf builds a zip archive from parts, header sizes as given.
func zipOf(t testing.TB, parts ...part) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range parts {
		data, crc, size := deflate(t, p.pieces...)
		if p.declare != 0 {
			size = p.declare
		}
		w, err := zw.CreateRaw(&zip.FileHeader{Name: p.name, Method: zip.Deflate, CRC32: crc,
			CompressedSize64: uint64(len(data)), UncompressedSize64: size})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data) //nolint:errcheck
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bookParts are the parts of a one-sheet workbook around the sheet and shared strings.
func bookParts(sheet []piece, sst []piece) []part {
	parts := []part{
		{name: "[Content_Types].xml", pieces: []piece{text(`<Types/>`)}},
		{name: "xl/workbook.xml", pieces: []piece{text(`<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>`)}},
		{name: "xl/_rels/workbook.xml.rels", pieces: []piece{text(`<Relationships><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`)}},
		{name: "xl/worksheets/sheet1.xml", pieces: sheet},
	}
	if sst != nil {
		parts = append(parts, part{name: "xl/sharedStrings.xml", pieces: sst})
	}
	return parts
}

// book writes a one-sheet workbook and returns its path.
func book(t testing.TB, sheet []piece, sst []piece) string {
	t.Helper()
	return writeTemp(t, "book.xlsx", zipOf(t, bookParts(sheet, sst)...))
}

func writeTemp(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sheetXML wraps rows in a worksheet.
func sheetXML(rows ...piece) []piece {
	return append(append([]piece{text(`<worksheet><sheetData>`)}, rows...), text(`</sheetData></worksheet>`))
}

// headerRow is row 1 with the three required columns, inline strings.
const headerRow = `<row r="1"><c r="A1" t="inlineStr"><is><t>code</t></is></c><c r="B1" t="inlineStr"><is><t>name</t></is></c><c r="C1" t="inlineStr"><is><t>phone</t></is></c></row>`

// testHeader is the header rule of the tests: a row that names two or more of the columns
// the fixtures have (code, name, phone; in English or Chinese).
func testHeader(cells []string) bool {
	known := 0
	for _, c := range cells {
		switch strings.TrimSpace(strings.TrimPrefix(c, "\uFEFF")) {
		case "code", "name", "phone", "客户编号", "客户名称", "手机号":
			known++
		}
	}
	return known >= 2
}

// inspectPath runs submit's checks on the file at p.
func inspectPath(p string, format Format, sheet string, lim Limits) (Inspection, error) {
	return inspectChoice(p, Choice{Format: format, Sheet: sheet}, lim)
}

// inspectChoice is inspectPath with every choice the uploader made.
func inspectChoice(p string, c Choice, lim Limits) (Inspection, error) {
	return inspectFile(p, c, lim, CountAuto)
}

// inspect is inspectPath counting rows as mode says.
func inspect(p string, format Format, sheet string, lim Limits, mode CountMode) (Inspection, error) {
	return inspectFile(p, Choice{Format: format, Sheet: sheet}, lim, mode)
}

func inspectFile(p string, c Choice, lim Limits, mode CountMode) (Inspection, error) {
	f, err := os.Open(p)
	if err != nil {
		return Inspection{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Inspection{}, err
	}
	return Inspect(f, info.Size(), c, Options{Limits: lim, Count: mode, IsHeader: testHeader})
}

// inspectReader inspects size bytes read from r.
func inspectReader(r io.ReaderAt, size int64, format Format, sheet string, lim Limits, mode CountMode) (Inspection, error) {
	return Inspect(r, size, Choice{Format: format, Sheet: sheet}, Options{Limits: lim, Count: mode, IsHeader: testHeader})
}

// openXLSX opens sheet of the workbook at p; the source closes the file.
func openXLSX(p, sheet string, lim Limits, tmpDir string) (*xlsxSource, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s, err := newXLSXSource(f, info.Size(), sheet, lim, tmpDir)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.file = f
	return s, nil
}
