package sheet

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettest"
)

// book writes a one-sheet workbook and returns its path.
func book(t testing.TB, sheet []sheettest.Piece, sst []sheettest.Piece) string {
	t.Helper()
	return writeTemp(t, "book.xlsx", sheettest.Zip(t, sheettest.BookParts(sheet, sst)...))
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
func sheetXML(rows ...sheettest.Piece) []sheettest.Piece {
	return append(append([]sheettest.Piece{sheettest.Text(`<worksheet><sheetData>`)}, rows...), sheettest.Text(`</sheetData></worksheet>`))
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
