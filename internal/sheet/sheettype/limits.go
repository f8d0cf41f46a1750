package sheettype

import "github.com/taskcenter/taskcenter/internal/config"

// Limits bound what a file may be and how much of it reading holds at once. Every
// bound is enforced while the file is streamed, never after a value is already in memory, so
// the memory reading a file uses does not depend on what it contains. A zero field takes the
// default named in its comment (see WithDefaults).
type Limits struct {
	// MaxUncompressed caps the bytes an .xlsx may expand to: the sizes its zip directory
	// declares (checked at submit, with overflow-proof sums) and the bytes actually
	// decompressed from all of its parts in one reading pass (counted, never trusted).
	// Default 1 GiB.
	MaxUncompressed int64
	// MaxEntries caps the number of files inside an .xlsx. Default 10,000.
	MaxEntries int
	// MaxRows caps the data rows of a sheet (rows below the header). Default 1,000,000.
	MaxRows int
	// MaxCellChars caps the characters of one cell, as Excel does. A longer cell is cut
	// while it is read and its row is rejected ("name: must be at most 100 characters (this
	// one has more than 32,767)"). Default 32,767.
	MaxCellChars int
	// MaxColumns caps the columns of a row, as Excel does. A row with a cell further right
	// fails the file. Default 16,384 (column XFD).
	MaxColumns int
	// MaxRowBytes caps one row: the bytes of its XML (or CSV text) and the bytes of its
	// values once shared strings are looked up. It also caps one shared string's XML. A row
	// over it fails the file: no spreadsheet program writes such a row. Default 8 MiB.
	MaxRowBytes int64
	// MaxSharedStrings caps the entries of an .xlsx shared string table, whose offsets stay
	// in memory (4 bytes each). Default 16,777,216 (64 MiB of offsets).
	MaxSharedStrings int
}

// WithDefaults fills the zero fields of l from the configuration's defaults (import.*), their
// one home. Negative values are treated as zero: a limit can be raised or lowered, never
// switched off.
func (l Limits) WithDefaults() Limits {
	d := config.Default().Import
	orDefault(&l.MaxUncompressed, d.MaxUncompressedBytes)
	orDefault(&l.MaxEntries, d.MaxEntries)
	orDefault(&l.MaxRows, d.MaxRows)
	orDefault(&l.MaxCellChars, d.MaxCellChars)
	orDefault(&l.MaxColumns, d.MaxColumns)
	orDefault(&l.MaxRowBytes, d.MaxRowBytes)
	orDefault(&l.MaxSharedStrings, d.MaxSharedStrings)
	return l
}

// orDefault sets the limit *v to d unless it is positive.
func orDefault[T int | int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
