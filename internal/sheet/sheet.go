// Package sheet reads spreadsheets a row at a time: .xlsx, legacy .xls (Excel 97–2003,
// BIFF8) and CSV in UTF-8 or GB18030. Inspect does the checks that are cheap enough to run
// before a file is accepted and picks its sheet; Open streams that sheet's rows. Memory does
// not depend on what a file holds: every read is bounded by Limits, and a file that breaks a
// bound, is damaged or is not a spreadsheet fails with a *sheettype.Error worded for the
// person who made it.
//
// Where each format is read:
//   - .xlsx: xlsxread.go streams a worksheet from the zip with the XML scanner in
//     xmlscan.go; sharedstrings.go holds its shared strings (on disk past 32 MB);
//     inspect.go and zipscan.go do submit's checks (the zip directory, the sheet list, the
//     row count).
//   - .xls: package sheet/xls reads the BIFF8 records, its shared strings into the same
//     table; sheets.go checks a workbook (inspectXLS) and source.go opens a sheet.
//   - CSV: csvread.go reads the rows, in the encoding encoding.go detects (or is told);
//     inspect.go checks the text.
//
// Inspect (inspect.go) and Open (source.go) pick the reader; sheets.go picks the sheet of
// a workbook. The limits, the *Error and its words, and a cell's capped text are in
// sheet/sheettype, which sheet and sheet/xls share.
package sheet

import (
	"path"
	"strings"

	"github.com/taskcenter/taskcenter/internal/sheet/sheettype"
)

// Limits bound what a file may be and how much of it reading holds at once (see
// sheettype.Limits: it lives there so that the format readers in packages of their own,
// sheet/xls, are bounded by the same values).
type Limits = sheettype.Limits

// Format is the kind of file being read.
type Format string

// Formats the package reads.
const (
	XLSX Format = "xlsx"
	CSV  Format = "csv"
	XLS  Format = "xls" // Excel 97–2003 (BIFF8)
)

// FormatOf picks the format from an uploaded file's name.
func FormatOf(filename string) (Format, error) {
	switch strings.ToLower(path.Ext(filename)) {
	case ".xlsx":
		return XLSX, nil
	case ".csv":
		return CSV, nil
	case ".xls":
		return XLS, nil
	}
	return "", sheettype.Errorf(sheettype.UnsupportedFormat, "only .xlsx, .xls and .csv files can be imported; %q is none of them", filename)
}

// OverRowLimit is the TooManyRows error of what (say "the sheet") holding rows data rows,
// over lim.MaxRows. A reader of the rows meets it when a sheet holds more rows than Inspect
// counted (rows its byte scan cannot recognise).
func OverRowLimit(what string, rows int, lim Limits) *sheettype.Error {
	return tooManyRows(what, rows, lim.WithDefaults())
}

// Choice is what the uploader chose about a file: its format (by its name), the sheet (empty:
// the first sheet, or the one sheet whose header names the columns) and, for a CSV, the text
// encoding (empty: auto).
type Choice struct {
	Format   Format
	Sheet    string
	Encoding Encoding
}

// Options are how Inspect reads a file.
type Options struct {
	// Limits bound the file and what reading it holds; zero fields take their defaults.
	Limits Limits
	// Count says whether a worksheet's rows are counted or its declared size is trusted.
	// Default CountAuto.
	Count CountMode
	// IsHeader reports whether a row names the columns of the data. It picks the sheet when
	// none was chosen and a workbook's first sheet does not start with such a row (the one
	// other sheet that does), and confirms a CSV auto-detected as GB18030. Only the first
	// HeaderSearchRows rows are looked at. nil: no row does.
	IsHeader func(cells []string) bool
	// CountBytes bounds the rows counted to the first CountBytes bytes of the sheet's XML
	// or of a CSV's text (a CSV's line-length and encoding checks stop there too, at the end
	// of a line), so that Inspect answers in about the same time whatever the file's size.
	// A file longer than that gets Rows estimated from the part counted (Counted false), and
	// is refused as over the row limit only when that part alone is. 0: no bound.
	CountBytes int64
}

// HeaderSearchRows is how far down a sheet the header row is looked for.
const HeaderSearchRows = 10

// CountMode says whether Inspect counts a worksheet's rows or may trust its declared size.
type CountMode int

// Count modes.
const (
	// CountAuto: count when the declaration is missing, or the sheet is small enough that
	// counting is cheap, or it declares implausibly few rows for its size (submit).
	CountAuto CountMode = iota
	// CountAlways: always count (the worker, before its first batch).
	CountAlways
	// CountNever: trust the declaration (a resumed attempt, which committed rows already).
	CountNever
)

// Inspection is what the cheap checks learned about a file.
type Inspection struct {
	Format Format
	// Sheet is the sheet to import (xlsx); the requested one, or the first.
	Sheet string
	// Sheets lists every sheet in workbook order (xlsx).
	Sheets []string
	// Rows is the number of data rows as the person who made the file counts them: the rows
	// below the header (taken to be row 1) down to the last one that is not blank. A trailing
	// newline or blank lines at the end are not rows. For an .xlsx it is counted from the
	// sheet (see CountMode) or read from its declared dimension; for a CSV it is counted.
	// 0 when unknown.
	Rows int
	// Counted says Rows was counted from all of the data, not taken from a declaration or
	// estimated from the part within Options.CountBytes.
	Counted bool
	// Encoding is the text encoding a CSV is read in (auto resolved).
	Encoding Encoding
}
