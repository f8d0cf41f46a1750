package importer

// source streams a sheet's rows with their spreadsheet row numbers (header = 1). Memory
// does not grow with the file: rows are read one at a time, and each is bounded by Limits.
// Each row's cells slice is new, so callers may keep it.
type source interface {
	// Next advances to the next row; false at the end or on error.
	Next() bool
	// Row returns the current row's number and cells (raw values, not display formats).
	Row() (int, []string)
	// Long lists the columns (0-based, ascending) of the current row whose text was longer
	// than Limits.MaxCellChars: their cells hold only the first MaxCellChars characters.
	Long() []int
	Err() error
	Close() error
}

// openSource opens the file for streaming.
func openSource(p string, ins Inspection, lim Limits, tmpDir string) (source, error) {
	switch ins.Format {
	case CSV:
		return openCSV(p, ins.Encoding, lim)
	case XLS:
		return openXLS(p, ins.Sheet, lim, tmpDir)
	}
	return openXLSX(p, ins.Sheet, lim, tmpDir)
}
