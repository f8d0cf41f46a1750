// Package sheettype holds what package sheet and its format readers (sheet/xls) share, so
// that a reader in a package of its own needs nothing from sheet: the Limits that bound
// reading a file, the *Error a file fails with and the words its messages use (Thousands,
// SizeWords, ColumnName, Clip), and Text, one cell's text kept within MaxCellChars. Like
// river's rivertype, it sits below the packages that share it and imports none of them.
package sheettype

import "fmt"

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

// Errorf is the *Error of code, its message formatted as fmt.Sprintf does.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// OverColumnLimit is the TooManyColumns error of row (1-based) holding a value beyond
// lim.MaxColumns.
func OverColumnLimit(row int, lim Limits) *Error {
	return Errorf(TooManyColumns,
		"row %d has a value beyond column %s; a sheet has at most %s columns, so the file is damaged or was not made by a spreadsheet program",
		row, ColumnName(lim.MaxColumns-1), Thousands(int64(lim.MaxColumns)))
}
