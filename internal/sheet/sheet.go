// Package sheet reads spreadsheets a row at a time: .xlsx, legacy .xls (Excel 97–2003,
// BIFF8) and CSV in UTF-8 or GB18030. Inspect does the checks that are cheap enough to run
// before a file is accepted and picks its sheet; Open streams that sheet's rows. Memory does
// not depend on what a file holds: every read is bounded by Limits, and a file that breaks a
// bound, is damaged or is not a spreadsheet fails with an *Error worded for the person who
// made it.
package sheet

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

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
	return "", problem(UnsupportedFormat, "only .xlsx, .xls and .csv files can be imported; %q is none of them", filename)
}

// Error is why a file cannot be read, in words for the person who made it: what is wrong
// with the file, never with the reading of it (a failed read of the file itself is returned
// as it is).
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Code says what is wrong with a file.
type Code string

// Codes of an Error.
const (
	// UnsupportedFormat: not a spreadsheet this package reads (a PDF, a Word document, an
	// .xlsx named .csv, a password-protected or pre-97 workbook…).
	UnsupportedFormat Code = "unsupported_format"
	// TooLargeUncompressed: a workbook that expands (or claims to) to more than
	// Limits.MaxUncompressed.
	TooLargeUncompressed Code = "too_large_uncompressed"
	EmptyFile            Code = "empty_file"
	// DamagedFile: not what its format says it holds, or beyond what a spreadsheet program
	// writes (too many parts, sheets or shared strings).
	DamagedFile    Code = "damaged_file"
	NoSheets       Code = "no_sheets"
	SheetNotFound  Code = "sheet_not_found"
	AmbiguousSheet Code = "ambiguous_sheet" // no sheet chosen, and several could be the one
	TooManyRows    Code = "too_many_rows"
	TooManyColumns Code = "too_many_columns"
	RowTooLarge    Code = "row_too_large"
	// NotUTF8, NotGB18030: a CSV that is not text in the encoding chosen for it;
	// UnknownEncoding: one auto could not recognise.
	NotUTF8         Code = "not_utf8"
	NotGB18030      Code = "not_gb18030"
	UnknownEncoding Code = "unknown_encoding"
	BadEncoding     Code = "bad_encoding" // an encoding ParseEncoding does not know
)

func problem(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// OverRowLimit is the TooManyRows error of what (say "the sheet") holding rows data rows,
// over lim.MaxRows. A reader of the rows meets it when a sheet holds more rows than Inspect
// counted (rows its byte scan cannot recognise).
func OverRowLimit(what string, rows int, lim Limits) *Error {
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
	// Counted says Rows was counted from the data, not taken from a declaration.
	Counted bool
	// Encoding is the text encoding a CSV is read in (auto resolved).
	Encoding Encoding
}

// ColumnName is the spreadsheet letter of a 0-based column: A, …, Z, AA, ….
func ColumnName(i int) string {
	name := ""
	for i++; i > 0; i = (i - 1) / 26 {
		name = string(rune('A'+(i-1)%26)) + name
	}
	return name
}

// Thousands writes n with thousands separators, 1,000,000, for messages about a file.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Clip shortens s to at most n bytes (and a "…") for a message quoting it, cutting between
// characters.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
