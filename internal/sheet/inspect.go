package sheet

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

var (
	zipMagic = []byte("PK\x03\x04")
	oleMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
)

const (
	// cheapCount is the sheet size (uncompressed) below which submit always counts rows.
	cheapCount = 16 << 20
	// plausibleRowBytes is the most XML a declared row may average before submit counts.
	plausibleRowBytes = 16 << 10
)

// Inspect does the checks on the size bytes of r that are cheap enough for submit: the file
// is what its name says, a sane zip that is not a bomb (by its directory and by what its
// parts decompress to), has the sheet asked for (or picks one, see Choice), no row too large
// to read, and is not over the row limit; a CSV is text in its encoding (auto picks one).
// A file that fails them fails with a *sheettype.Error.
func Inspect(r io.ReaderAt, size int64, c Choice, o Options) (Inspection, error) {
	format, sheet := c.Format, c.Sheet
	lim := o.Limits.WithDefaults()
	if size == 0 {
		return Inspection{}, sheettype.Errorf(sheettype.EmptyFile, "the file is empty")
	}
	head := make([]byte, 8)
	n, _ := r.ReadAt(head, 0)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, oleMagic):
		// An Excel 97–2003 workbook, whatever its name says (an .xls renamed .xlsx is common).
		return inspectXLS(r, size, sheet, lim, o.IsHeader)
	case bytes.HasPrefix(head, []byte("%PDF")):
		return Inspection{}, sheettype.Errorf(sheettype.UnsupportedFormat, "this is a PDF, not a spreadsheet")
	}
	if format == CSV {
		if bytes.HasPrefix(head, zipMagic) {
			return Inspection{}, sheettype.Errorf(sheettype.UnsupportedFormat, "this is an .xlsx workbook named .csv; upload it with the .xlsx extension")
		}
		return inspectCSV(r, size, c.Encoding, lim, o.IsHeader, o.CountBytes)
	}
	if format == XLS && !bytes.HasPrefix(head, zipMagic) {
		return Inspection{}, sheettype.Errorf(sheettype.UnsupportedFormat,
			"this .xls is not an Excel workbook: it holds text (some systems export an HTML or tab-separated table named .xls); open it in Excel or LibreOffice and save it as .xlsx")
	}
	if !bytes.HasPrefix(head, zipMagic) {
		return Inspection{}, sheettype.Errorf(sheettype.UnsupportedFormat, "this is not an .xlsx workbook (an .xlsx file is a zip archive; this one is not)")
	}
	return inspectXLSX(r, size, sheet, lim, o.Count, o.IsHeader, o.CountBytes)
}

// inspectCSV checks that the file is text in its encoding (enc; auto picks one, see
// EncodingAuto), counts its data rows (the last line that is not blank, less the header
// line) and refuses a line longer than a row may be. Every pass streams the file, or its
// first countBytes bytes to the end of a line (0: all of it).
func inspectCSV(r io.ReaderAt, size int64, enc Encoding, lim Limits, isHeader func([]string) bool, countBytes int64) (Inspection, error) {
	var passes []*prefixReader
	raw := func() io.Reader {
		p := &prefixReader{r: io.NewSectionReader(r, 0, size), budget: countBytes, size: size}
		passes = append(passes, p)
		return p
	}
	ins, err := inspectCSVPasses(raw, enc, lim, isHeader)
	if err != nil {
		return ins, err
	}
	for _, p := range passes {
		if p.cut() { // the pass that counted stopped at the bound
			if ins.Rows > lim.MaxRows {
				return Inspection{}, moreRowsThan("the file", ins.Rows, lim)
			}
			ins.Rows, ins.Counted = estimateRows(ins.Rows, p.n, size), false
			return ins, nil
		}
	}
	if ins.Rows > lim.MaxRows {
		return Inspection{}, tooManyRows("the file", ins.Rows, lim)
	}
	return ins, nil
}

// estimateRows is the rows of a whole of size bytes, from rows counted in its first part.
func estimateRows(rows int, part, size int64) int {
	if part <= 0 {
		return rows
	}
	return int(float64(rows) * float64(size) / float64(part))
}

// inspectCSVPasses runs inspectCSV's passes over the text raw gives, each time from the
// start.
func inspectCSVPasses(raw func() io.Reader, enc Encoding, lim Limits, isHeader func([]string) bool) (Inspection, error) {
	switch enc {
	case EncodingUTF8:
		return inspectCSVIn(raw(), EncodingUTF8, lim, sheettype.NotUTF8,
			"the CSV is not UTF-8 encoded (%s; it may be GBK/GB18030 from an older Excel): send encoding=gb18030 or auto, or save it as \"CSV UTF-8\" and upload again")
	case EncodingGB18030:
		return inspectCSVIn(decoded(raw(), EncodingGB18030), EncodingGB18030, lim, sheettype.NotGB18030,
			"the CSV is not GB18030/GBK text (%s holds bytes that are not GB18030); send encoding=utf-8 or auto if it is UTF-8, or save it as \"CSV UTF-8\" and upload again")
	}
	ins, bad, err := scanCSV(raw(), false, lim)
	if err != nil || bad == nil {
		ins.Encoding = EncodingUTF8
		return ins, err
	}
	tried := func(gb string) *sheettype.Error {
		return sheettype.Errorf(sheettype.UnknownEncoding,
			"the CSV's text encoding could not be recognised (tried UTF-8: %s is not UTF-8; tried GB18030/GBK: %s). Save it from your spreadsheet program as \"CSV UTF-8\" or as .xlsx and upload again",
			bad.where(), gb)
	}
	var stats gbStats
	ins, gbad, err := scanCSV(decoded(io.TeeReader(raw(), &stats), EncodingGB18030), true, lim)
	switch {
	case err != nil:
		return ins, err
	case gbad != nil:
		return ins, tried(gbad.where() + " holds bytes that are not GB18030")
	case !stats.chinese():
		return ins, tried("it decodes, but not as Chinese text: it looks like another encoding, such as Latin-1 or Windows-1252")
	case !knownHeader(decoded(raw(), EncodingGB18030), lim, isHeader):
		return ins, tried("it decodes, but none of its first rows names the columns, e.g. code (客户编号), name (客户名称), phone (手机号)")
	}
	ins.Encoding = EncodingGB18030
	return ins, nil
}

// inspectCSVIn inspects the CSV r as text in enc, the encoding chosen for it (for GB18030, r
// is the text decoded from it): the first bytes that are not text in enc are refused with
// code and message, whose %s says where they are.
func inspectCSVIn(r io.Reader, enc Encoding, lim Limits, code sheettype.Code, message string) (Inspection, error) {
	ins, bad, err := scanCSV(r, enc == EncodingGB18030, lim)
	if err == nil && bad != nil {
		err = sheettype.Errorf(code, message, bad.where())
	}
	ins.Encoding = enc
	return ins, err
}

// prefixReader reads r, which holds size bytes, up to budget bytes and on to the end of the
// line there: a '\n' is a whole character in UTF-8 and in GB18030, so a pass over the
// prefix never meets a character cut in two. 0: no budget.
type prefixReader struct {
	r      io.Reader
	budget int64
	size   int64
	n      int64 // bytes passed on
	ended  bool  // the end of the line past the budget was reached
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if p.ended {
		return 0, io.EOF
	}
	n, err := p.r.Read(b)
	if p.budget > 0 && p.n+int64(n) > p.budget {
		from := max(p.budget-p.n, 0)
		if i := bytes.IndexByte(b[from:n], '\n'); i >= 0 {
			n = int(from) + i + 1
			p.ended, err = true, nil
		}
	}
	p.n += int64(n)
	return n, err
}

// cut reports whether the reader stopped at the budget before the end of r.
func (p *prefixReader) cut() bool { return p.ended && p.n < p.size }

// scanCSV counts the data rows of CSV text (UTF-8: decoded says it was transcoded, so bad
// characters are U+FFFD) and checks its line lengths. bad is where the text is not valid
// in its encoding; the scan stops there.
func scanCSV(f io.Reader, decoded bool, lim Limits) (Inspection, *encodingError, error) {
	buf := make([]byte, 64<<10)
	var carry []byte
	var (
		lines     int   // newlines before the chunk
		lastLine  int   // 1-based number of the last line holding a non-blank byte
		offset    int64 // text offset of the chunk
		lineStart int64 // text offset where the current line began
	)
	for {
		n, err := f.Read(buf)
		data := append(carry, buf[:n]...)
		cut := len(data)
		if err == nil {
			cut = completeRunes(data) // an incomplete last character waits for the next read
		}
		chunk := data[:cut]
		if bytes.IndexByte(chunk, 0) >= 0 {
			return Inspection{}, nil, sheettype.Errorf(sheettype.UnsupportedFormat, "this is a binary file, not a CSV text file")
		}
		if decoded {
			if i := bytes.Index(chunk, []byte("\uFFFD")); i >= 0 {
				return Inspection{}, &encodingError{line: lines + bytes.Count(chunk[:i], []byte{'\n'}) + 1}, nil
			}
		} else if !utf8.Valid(chunk) {
			i := firstInvalid(chunk)
			return Inspection{}, &encodingError{line: lines + bytes.Count(chunk[:i], []byte{'\n'}) + 1, b: chunk[i]}, nil
		}
		if last := lastNonBlank(chunk); last >= 0 {
			lastLine = lines + bytes.Count(chunk[:last], []byte{'\n'}) + 1
		}
		for rest, at := chunk, offset; ; {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			if at+int64(i)-lineStart > lim.MaxRowBytes {
				return Inspection{}, nil, lineTooLong(lines+bytes.Count(chunk[:at-offset], []byte{'\n'})+1, lim)
			}
			lineStart = at + int64(i) + 1
			rest, at = rest[i+1:], at+int64(i)+1
		}
		lines += bytes.Count(chunk, []byte{'\n'})
		offset += int64(cut)
		if offset-lineStart > lim.MaxRowBytes {
			return Inspection{}, nil, lineTooLong(lines+1, lim)
		}
		carry = append(carry[:0:0], data[cut:]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Inspection{}, nil, err
		}
	}
	return Inspection{Format: CSV, Rows: max(lastLine-1, 0), Counted: true}, nil, nil
}

func lineTooLong(line int, lim Limits) *sheettype.Error {
	return sheettype.Errorf(sheettype.RowTooLarge,
		"line %d is longer than %s; a row of a spreadsheet is far smaller, so the file is damaged or is not a CSV export", line, sheettype.LimitWords(lim.MaxRowBytes))
}

func tooManyRows(what string, rows int, lim Limits) *sheettype.Error {
	return sheettype.Errorf(sheettype.TooManyRows, "%s has %s rows, over the limit of %s data rows; split it into smaller files",
		what, sheettype.Thousands(int64(rows)), sheettype.Thousands(int64(lim.MaxRows)))
}

// moreRowsThan is tooManyRows said of a file whose first rows alone are over the limit.
func moreRowsThan(what string, rows int, lim Limits) *sheettype.Error {
	return sheettype.Errorf(sheettype.TooManyRows, "%s has more than %s rows, over the limit of %s data rows; split it into smaller files",
		what, sheettype.Thousands(int64(rows)), sheettype.Thousands(int64(lim.MaxRows)))
}

// lastNonBlank is the index of the last byte of b that is not whitespace or a comma (a line
// of only those is a blank row), or -1.
func lastNonBlank(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		switch b[i] {
		case ' ', '\t', '\r', '\n', ',':
		default:
			return i
		}
	}
	return -1
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

// inspectXLSX checks a workbook. Every part it reads is counted against one budget of
// MaxUncompressed decompressed bytes.
func inspectXLSX(f io.ReaderAt, size int64, sheet string, lim Limits, mode CountMode, isHeader func([]string) bool, countBytes int64) (Inspection, error) {
	entries, err := workbookEntries(f, size, lim)
	if err != nil {
		return Inspection{}, err
	}
	b := newBudget(lim.MaxUncompressed)
	sheets, err := workbookSheets(entries, b, lim)
	if err != nil {
		return Inspection{}, partProblem(err, lim, "the workbook's sheet list cannot be read")
	}
	if len(sheets) == 0 {
		return Inspection{}, sheettype.Errorf(sheettype.NoSheets, "the workbook has no sheets")
	}
	names := make([]string, len(sheets))
	for i, s := range sheets {
		names[i] = s.name
	}
	chosen := sheets[0]
	if sheet == "" && len(sheets) > 1 {
		picked, err := pickSheet(names, func(n string) (source, error) { return newXLSXSource(f, size, n, lim, "") }, isHeader)
		if err != nil {
			return Inspection{}, err
		}
		sheet = picked
	}
	if sheet != "" {
		found := false
		for _, s := range sheets {
			if s.name == sheet {
				chosen, found = s, true
				break
			}
		}
		if !found {
			return Inspection{}, sheettype.Errorf(sheettype.SheetNotFound, "the workbook has no sheet named %q; it has: %s", sheet, strings.Join(names, ", "))
		}
	}
	ins := Inspection{Format: XLSX, Sheet: chosen.name, Sheets: names}
	zf := entries[chosen.path]
	if zf == nil {
		return Inspection{}, sheettype.Errorf(sheettype.DamagedFile, "the sheet %q is listed but missing from the file", chosen.name)
	}
	estimated := false
	if ins.Rows, ins.Counted, estimated, err = sheetRows(zf, b, lim, mode, countBytes); err != nil {
		return Inspection{}, err
	}
	if ins.Rows > lim.MaxRows && !estimated {
		return Inspection{}, tooManyRows(fmt.Sprintf("the sheet %q", chosen.name), ins.Rows, lim)
	}
	return ins, nil
}

// openZip opens the zip archive of a workbook, bounded before archive/zip reads its directory
// (checkZipDirectory) and after (at most MaxEntries parts). An archive that does not open is
// refused with damaged, whose %v is why.
func openZip(r io.ReaderAt, size int64, lim Limits, damaged string) (*zip.Reader, error) {
	if err := checkZipDirectory(r, size, lim); err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, sheettype.Errorf(sheettype.DamagedFile, damaged, err)
	}
	if len(zr.File) > lim.MaxEntries {
		return nil, tooManyParts(lim)
	}
	return zr, nil
}

// workbookEntries opens the zip archive of a workbook within its bounds (openZip; its parts
// declaring at most MaxUncompressed bytes together), and returns its parts by name.
func workbookEntries(f io.ReaderAt, size int64, lim Limits) (map[string]*zip.File, error) {
	zr, err := openZip(f, size, lim, "the .xlsx file is damaged and cannot be opened (%v); save it again from your spreadsheet program")
	if err != nil {
		return nil, err
	}
	// Checked sum of the declared sizes: it saturates instead of wrapping around, so two
	// entries declaring 2^63 bytes each cannot add up to a few bytes.
	var total uint64
	entries := map[string]*zip.File{}
	for _, zf := range zr.File {
		if zf.UncompressedSize64 > math.MaxUint64-total {
			total = math.MaxUint64
		} else {
			total += zf.UncompressedSize64
		}
		entries[zf.Name] = zf
	}
	if total > uint64(lim.MaxUncompressed) {
		if total >= 1<<60 {
			return nil, sheettype.Errorf(sheettype.TooLargeUncompressed,
				"the workbook's parts claim to expand to more than any disk holds, over the limit of %s; the file is damaged or a zip bomb",
				sheettype.LimitWords(lim.MaxUncompressed))
		}
		return nil, sheettype.Errorf(sheettype.TooLargeUncompressed,
			"the workbook expands to %s, over the limit of %s", sheettype.SizeWords(int64(total)), sheettype.LimitWords(lim.MaxUncompressed))
	}
	if entries["[Content_Types].xml"] == nil || entries["xl/workbook.xml"] == nil {
		return nil, sheettype.Errorf(sheettype.UnsupportedFormat, "this zip archive is not an Excel workbook (no xl/workbook.xml)")
	}
	return entries, nil
}

// sheetRows is the number of data rows of the worksheet in zf, and whether they were
// counted rather than taken from its declared dimension (see CountMode) or estimated from
// its first countBytes bytes (0: no bound). An estimate is never over the row limit: the
// part counted is refused when it alone is.
func sheetRows(zf *zip.File, b *budget, lim Limits, mode CountMode, countBytes int64) (rows int, counted, estimated bool, err error) {
	declared := 0
	if mode != CountAlways {
		if declared, err = declaredRows(zf, b); err != nil {
			return 0, false, false, partProblem(err, lim, "the sheet cannot be read")
		}
	}
	count := mode == CountAlways
	if mode == CountAuto {
		size := zf.UncompressedSize64
		// Some writers (excelize outside its stream writer) declare "A1" whatever the data;
		// a hostile one declares two rows and holds a million.
		count = declared <= 1 || size <= cheapCount || size/uint64(declared) > plausibleRowBytes
	}
	if !count {
		return max(declared-1, 0), false, false, nil
	}
	n, scanned, whole, err := scanRows(zf, b, lim, countBytes)
	if err != nil {
		return 0, false, false, partProblem(err, lim, "the sheet cannot be read")
	}
	if !whole {
		if n-1 > lim.MaxRows {
			return 0, false, false, moreRowsThan("the sheet", n-1, lim)
		}
		return max(estimateRows(n, scanned, int64(min(zf.UncompressedSize64, math.MaxInt64)))-1, n-1, 0), false, true, nil
	}
	return max(n-1, 0), true, false, nil
}

func tooManyParts(lim Limits) *sheettype.Error {
	return sheettype.Errorf(sheettype.DamagedFile, "the workbook holds more than %s parts, more than a spreadsheet should; the file is damaged or is not a workbook",
		sheettype.Thousands(int64(lim.MaxEntries)))
}

func overBudget(lim Limits) *sheettype.Error {
	return sheettype.Errorf(sheettype.TooLargeUncompressed,
		"the workbook expands to more than %s when unpacked, over the limit; it may be damaged or a zip bomb. Save it again from your spreadsheet program, or split it",
		sheettype.LimitWords(lim.MaxUncompressed))
}

// partProblem turns an error reading a workbook part into the file problem it means.
func partProblem(err error, lim Limits, what string) error {
	var fp *sheettype.Error
	switch {
	case errors.As(err, &fp):
		return fp
	case errors.Is(err, errOverBudget):
		return overBudget(lim)
	case errors.Is(err, errSpan), errors.Is(err, errTagTooLong):
		return sheettype.Errorf(sheettype.DamagedFile, "%s: it holds an element larger than a spreadsheet writes, so the file is damaged or was not made by a spreadsheet program", what)
	}
	return sheettype.Errorf(sheettype.DamagedFile, "%s (%v); save it again from your spreadsheet program", what, err)
}

type sheetRef struct{ name, path string }

// workbookSheets lists the sheets in workbook order with the zip path of each.
func workbookSheets(entries map[string]*zip.File, b *budget, lim Limits) ([]sheetRef, error) {
	type sheet struct{ name, rid string }
	var sheets []sheet
	err := scanPart(entries["xl/workbook.xml"], b, func(local []byte) bool { return string(local) == "sheet" },
		func(s *xmlScanner) error {
			if string(s.name) != "sheet" {
				return nil
			}
			if len(sheets) >= lim.MaxEntries {
				return sheettype.Errorf(sheettype.DamagedFile, "the workbook lists more than %s sheets", sheettype.Thousands(int64(lim.MaxEntries)))
			}
			name, err := s.attrString("name", false)
			if err != nil {
				return err
			}
			rid, err := s.attrString("id", true)
			if err != nil {
				return err
			}
			sheets = append(sheets, sheet{name, rid})
			return nil
		})
	if err != nil {
		return nil, err
	}
	targets := map[string]string{}
	if zf := entries["xl/_rels/workbook.xml.rels"]; zf != nil {
		rels, err := readRels(zf, b, lim)
		if err != nil {
			return nil, err
		}
		for _, r := range rels {
			targets[r.id] = r.target
		}
	}
	out := make([]sheetRef, 0, len(sheets))
	for i, s := range sheets {
		p := targets[s.rid]
		if p == "" {
			p = fmt.Sprintf("xl/worksheets/sheet%d.xml", i+1)
		}
		out = append(out, sheetRef{name: s.name, path: p})
	}
	return out, nil
}

// rel is one workbook relationship, its target resolved to a zip path.
type rel struct{ id, typ, target string }

func readRels(zf *zip.File, b *budget, lim Limits) ([]rel, error) {
	var rels []rel
	err := scanPart(zf, b, func(local []byte) bool { return string(local) == "Relationship" },
		func(s *xmlScanner) error {
			if string(s.name) != "Relationship" {
				return nil
			}
			if len(rels) >= lim.MaxEntries {
				return sheettype.Errorf(sheettype.DamagedFile, "the workbook lists more than %s relationships", sheettype.Thousands(int64(lim.MaxEntries)))
			}
			var r rel
			var err error
			if r.id, err = s.attrString("Id", false); err != nil {
				return err
			}
			if r.typ, err = s.attrString("Type", false); err != nil {
				return err
			}
			if r.target, err = s.attrString("Target", false); err != nil {
				return err
			}
			t := strings.TrimPrefix(r.target, "/")
			if !strings.HasPrefix(t, "xl/") {
				t = path.Join("xl", t)
			}
			r.target = t
			rels = append(rels, r)
			return nil
		})
	return rels, err
}

// scanPart streams a small XML part (workbook, relationships), calling each for every start
// tag; wantAttrs names the elements whose attributes each reads.
func scanPart(zf *zip.File, b *budget, wantAttrs func([]byte) bool, each func(*xmlScanner) error) error {
	if zf == nil {
		return errors.New("part missing")
	}
	rc, err := zf.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	s := newXMLScanner(b.reader(rc), zf.UncompressedSize64, wantAttrs)
	for {
		switch s.Next() {
		case tokEOF:
			return nil
		case tokErr:
			return s.err
		case tokStart:
			if err := each(s); err != nil {
				return err
			}
		}
	}
}

// declaredRows reads a worksheet's <dimension ref="A1:F300001"/>, which writers put before
// the data, and stops there. It returns the last row it declares, 0 when it declares none.
func declaredRows(zf *zip.File, b *budget) (int, error) {
	rc, err := zf.Open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	s := newXMLScanner(b.reader(rc), zf.UncompressedSize64, func(local []byte) bool { return string(local) == "dimension" })
	for {
		switch s.Next() {
		case tokEOF:
			return 0, nil
		case tokErr:
			return 0, s.err
		case tokStart:
			switch string(s.name) {
			case "sheetData":
				return 0, nil
			case "dimension":
				ref, err := s.attrString("ref", false)
				if err != nil {
					return 0, err
				}
				_, last, _ := strings.Cut(ref, ":")
				if last == "" {
					last = ref
				}
				if _, row, ok := cellRef([]byte(last)); ok {
					return row, nil
				}
				return 0, nil
			}
		}
	}
}
