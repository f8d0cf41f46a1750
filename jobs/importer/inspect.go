package importer

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// Format is the kind of file being imported.
type Format string

// Formats the import reads.
const (
	XLSX Format = "xlsx"
	CSV  Format = "csv"
)

// Limits bound what an upload may be.
type Limits struct {
	// MaxUncompressed caps the declared uncompressed size of an .xlsx (zip bombs).
	MaxUncompressed int64
	// MaxEntries caps the number of files inside an .xlsx.
	MaxEntries int
	// MaxRows caps the data rows of a sheet.
	MaxRows int
	// SkipRowCount skips counting rows when a sheet does not declare its size: the worker
	// already has the count submit made.
	SkipRowCount bool
}

// FileProblem is why an uploaded file cannot be imported, in words for its uploader.
type FileProblem struct {
	Kind    ProblemKind
	Code    string
	Message string
}

// ProblemKind sorts file problems into the HTTP answers they get.
type ProblemKind int

// Kinds of file problems.
const (
	// Unsupported: not a spreadsheet we read (415).
	Unsupported ProblemKind = iota
	// Invalid: a spreadsheet, but damaged or unusable as it is (422).
	Invalid
	// TooLarge: over a size limit (413).
	TooLarge
)

func (p *FileProblem) Error() string { return p.Message }

func problem(kind ProblemKind, code, format string, args ...any) *FileProblem {
	return &FileProblem{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Inspection is what the cheap checks learned about a file.
type Inspection struct {
	Format Format
	// Sheet is the sheet to import (xlsx); the requested one, or the first.
	Sheet string
	// Sheets lists every sheet in workbook order (xlsx).
	Sheets []string
	// Rows estimates the sheet's rows including the header, from its declared dimension
	// (xlsx) or its line count (csv); 0 when unknown.
	Rows int
}

var (
	zipMagic = []byte("PK\x03\x04")
	oleMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
)

// FormatOf picks the format from an uploaded file's name.
func FormatOf(filename string) (Format, error) {
	switch strings.ToLower(path.Ext(filename)) {
	case ".xlsx":
		return XLSX, nil
	case ".csv":
		return CSV, nil
	case ".xls":
		return "", problem(Unsupported, "unsupported_format", "%q is an old Excel 97-2003 file; save it as .xlsx (Excel Workbook) and upload that", filename)
	}
	return "", problem(Unsupported, "unsupported_format", "only .xlsx and .csv files can be imported; %q is neither", filename)
}

// Inspect does the checks that are cheap enough for submit: the file is what its name says,
// a sane zip, not a bomb, has the sheet asked for, and is not over the row limit.
func Inspect(p string, format Format, sheet string, lim Limits) (Inspection, error) {
	f, err := os.Open(p)
	if err != nil {
		return Inspection{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Inspection{}, err
	}
	if info.Size() == 0 {
		return Inspection{}, problem(Invalid, "empty_file", "the file is empty")
	}
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, oleMagic):
		return Inspection{}, problem(Unsupported, "unsupported_format",
			"this is an old Excel 97-2003 (.xls) or a password-protected workbook; save it as an unprotected .xlsx")
	case bytes.HasPrefix(head, []byte("%PDF")):
		return Inspection{}, problem(Unsupported, "unsupported_format", "this is a PDF, not a spreadsheet")
	}
	if format == CSV {
		if bytes.HasPrefix(head, zipMagic) {
			return Inspection{}, problem(Unsupported, "unsupported_format", "this is an .xlsx workbook named .csv; upload it with the .xlsx extension")
		}
		return inspectCSV(f, lim)
	}
	if !bytes.HasPrefix(head, zipMagic) {
		return Inspection{}, problem(Unsupported, "unsupported_format", "this is not an .xlsx workbook (an .xlsx file is a zip archive; this one is not)")
	}
	return inspectXLSX(f, info.Size(), sheet, lim)
}

func inspectCSV(f *os.File, lim Limits) (Inspection, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Inspection{}, err
	}
	buf := make([]byte, 64<<10)
	var carry []byte
	lines, offset := 0, int64(0)
	for {
		n, err := f.Read(buf)
		data := append(carry, buf[:n]...)
		cut := len(data)
		if err == nil {
			cut = completeRunes(data) // an incomplete last character waits for the next read
		}
		chunk := data[:cut]
		if bytes.IndexByte(chunk, 0) >= 0 {
			return Inspection{}, problem(Unsupported, "unsupported_format", "this is a binary file, not a CSV text file")
		}
		if !utf8.Valid(chunk) {
			bad := firstInvalid(chunk)
			return Inspection{}, problem(Invalid, "not_utf8",
				"the CSV is not UTF-8 encoded (byte 0x%02X at offset %d; it may be GBK/GB18030 from an older Excel); save it as \"CSV UTF-8\" and upload again",
				chunk[bad], offset+int64(bad))
		}
		lines += bytes.Count(chunk, []byte{'\n'})
		offset += int64(cut)
		carry = append(carry[:0:0], data[cut:]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Inspection{}, err
		}
	}
	rows := lines + 1 // the last line may lack its newline; blank lines are skipped later
	if lim.MaxRows > 0 && rows-1 > lim.MaxRows {
		return Inspection{}, problem(Invalid, "too_many_rows", "the file has %d rows, over the limit of %d; split it", rows-1, lim.MaxRows)
	}
	return Inspection{Format: CSV, Rows: rows}, nil
}

// completeRunes returns the length of b without a trailing incomplete UTF-8 sequence.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return 0
}

func inspectXLSX(f *os.File, size int64, sheet string, lim Limits) (Inspection, error) {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return Inspection{}, problem(Invalid, "damaged_file", "the .xlsx file is damaged and cannot be opened (%v); save it again from your spreadsheet program", err)
	}
	if lim.MaxEntries > 0 && len(zr.File) > lim.MaxEntries {
		return Inspection{}, problem(Invalid, "damaged_file", "the workbook holds %d parts, more than a spreadsheet should (limit %d)", len(zr.File), lim.MaxEntries)
	}
	var total uint64
	entries := map[string]*zip.File{}
	for _, zf := range zr.File {
		total += zf.UncompressedSize64
		entries[zf.Name] = zf
	}
	if lim.MaxUncompressed > 0 && total > uint64(lim.MaxUncompressed) {
		return Inspection{}, problem(TooLarge, "too_large_uncompressed",
			"the workbook expands to %d MB, over the limit of %d MB", total>>20, lim.MaxUncompressed>>20)
	}
	if entries["[Content_Types].xml"] == nil || entries["xl/workbook.xml"] == nil {
		return Inspection{}, problem(Unsupported, "unsupported_format", "this zip archive is not an Excel workbook (no xl/workbook.xml)")
	}
	sheets, err := workbookSheets(entries)
	if err != nil {
		return Inspection{}, problem(Invalid, "damaged_file", "the workbook's sheet list cannot be read (%v)", err)
	}
	if len(sheets) == 0 {
		return Inspection{}, problem(Invalid, "no_sheets", "the workbook has no sheets")
	}
	names := make([]string, len(sheets))
	for i, s := range sheets {
		names[i] = s.name
	}
	chosen := sheets[0]
	if sheet != "" {
		found := false
		for _, s := range sheets {
			if s.name == sheet {
				chosen, found = s, true
			}
		}
		if !found {
			return Inspection{}, problem(Invalid, "sheet_not_found", "the workbook has no sheet named %q; it has: %s", sheet, strings.Join(names, ", "))
		}
	}
	ins := Inspection{Format: XLSX, Sheet: chosen.name, Sheets: names}
	if zf := entries[chosen.path]; zf != nil {
		if ins.Rows = declaredRows(zf); ins.Rows <= 1 && !lim.SkipRowCount {
			// Some writers (excelize outside its stream writer) declare "A1" whatever the data.
			ins.Rows = countRows(zf)
		}
	} else {
		return Inspection{}, problem(Invalid, "damaged_file", "the sheet %q is listed but missing from the file", chosen.name)
	}
	if lim.MaxRows > 0 && ins.Rows-1 > lim.MaxRows {
		return Inspection{}, problem(Invalid, "too_many_rows", "the sheet %q has %d rows, over the limit of %d; split it", chosen.name, ins.Rows-1, lim.MaxRows)
	}
	return ins, nil
}

type sheetRef struct{ name, path string }

// workbookSheets lists the sheets in workbook order with the zip path of each.
func workbookSheets(entries map[string]*zip.File) ([]sheetRef, error) {
	var wb struct {
		Sheets []struct {
			Name string `xml:"name,attr"`
			RID  string `xml:"http://schemas.openxmlformats.org/officeDocument/2006/relationships id,attr"`
		} `xml:"sheets>sheet"`
	}
	if err := decodeEntry(entries["xl/workbook.xml"], &wb); err != nil {
		return nil, err
	}
	var rels struct {
		Rels []struct {
			ID     string `xml:"Id,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	if zf := entries["xl/_rels/workbook.xml.rels"]; zf != nil {
		if err := decodeEntry(zf, &rels); err != nil {
			return nil, err
		}
	}
	targets := map[string]string{}
	for _, r := range rels.Rels {
		t := strings.TrimPrefix(r.Target, "/")
		if !strings.HasPrefix(t, "xl/") {
			t = path.Join("xl", t)
		}
		targets[r.ID] = t
	}
	out := make([]sheetRef, 0, len(wb.Sheets))
	for i, s := range wb.Sheets {
		p := targets[s.RID]
		if p == "" {
			p = fmt.Sprintf("xl/worksheets/sheet%d.xml", i+1)
		}
		out = append(out, sheetRef{name: s.Name, path: p})
	}
	return out, nil
}

func decodeEntry(zf *zip.File, v any) error {
	rc, err := zf.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	return xml.NewDecoder(io.LimitReader(rc, 16<<20)).Decode(v)
}

// declaredRows reads a worksheet's <dimension ref="A1:F300001"/>, which writers put before
// the data, and stops there. It returns 0 when the sheet declares none.
func declaredRows(zf *zip.File) int {
	rc, err := zf.Open()
	if err != nil {
		return 0
	}
	defer rc.Close()
	dec := xml.NewDecoder(rc)
	for {
		tok, err := dec.Token()
		if err != nil {
			return 0
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch se.Name.Local {
		case "sheetData":
			return 0
		case "dimension":
			for _, a := range se.Attr {
				if a.Name.Local != "ref" {
					continue
				}
				_, last, _ := strings.Cut(a.Value, ":")
				if last == "" {
					last = a.Value
				}
				if _, row, err := excelize.CellNameToCoordinates(last); err == nil {
					return row
				}
			}
			return 0
		}
	}
}

// countRows counts the <row> elements of a worksheet with a byte scan of the decompressed
// XML: far cheaper than parsing it, and exact for the rows present.
func countRows(zf *zip.File) int {
	rc, err := zf.Open()
	if err != nil {
		return 0
	}
	defer rc.Close()
	buf := make([]byte, 256<<10)
	n, carry := 0, 0
	for {
		m, err := rc.Read(buf[carry:])
		chunk := buf[:carry+m]
		n += bytes.Count(chunk, []byte("<row ")) + bytes.Count(chunk, []byte("<row>"))
		// Keep the tail that could hold the start of a tag cut in two.
		carry = min(len(chunk), 4)
		copy(buf, chunk[len(chunk)-carry:])
		if err != nil {
			return n
		}
	}
}
