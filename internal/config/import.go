package config

import (
	"time"
)

// Import tunes spreadsheet imports.
type Import struct {
	// MaxUploadBytes caps an upload; larger bodies answer 413 before they are read.
	// Default 104857600 (100 MiB).
	MaxUploadBytes int64 `yaml:"max_upload_bytes"`
	// MaxUncompressedBytes caps what an .xlsx may expand to (zip bombs). Default 1073741824
	// (1 GiB).
	MaxUncompressedBytes int64 `yaml:"max_uncompressed_bytes"`
	// MaxRows caps the data rows of one file. Default 1,000,000.
	MaxRows int `yaml:"max_rows"`
	// MaxEntries caps the files inside an .xlsx (a zip). Default 10000.
	MaxEntries int `yaml:"max_entries"`
	// MaxCellChars caps one cell, as Excel does; a longer cell is cut while it is read and its
	// row rejected. Default 32767.
	MaxCellChars int `yaml:"max_cell_chars"`
	// MaxColumns caps the columns of a row, as Excel does (column XFD); a cell further right
	// fails the file. Default 16384.
	MaxColumns int `yaml:"max_columns"`
	// MaxRowBytes caps one row's XML or CSV text and its values: a row over it fails the file.
	// Memory per import is bounded by these limits, whatever the file holds. Default 8388608
	// (8 MiB).
	MaxRowBytes int64 `yaml:"max_row_bytes"`
	// MaxSharedStrings caps an .xlsx shared string table (4 bytes of memory each; the text
	// spills to disk). Default 16777216.
	MaxSharedStrings int `yaml:"max_shared_strings"`
	// BatchSize is the rows written per transaction. Default 1000.
	BatchSize int `yaml:"batch_size"`
	// MaxConcurrentUploads caps the uploads one user may have in flight on one API process;
	// more answer 429 too_many_uploads. Default 4.
	MaxConcurrentUploads int `yaml:"max_concurrent_uploads"`
	// ReportTTL is how long an error report can be downloaded. Default 168h (7 days).
	ReportTTL time.Duration `yaml:"report_ttl"`
	// UndoTTL is how long an import can be undone after it ends: its before-image (what it
	// changed, inserted or removed) is kept this long, then the cleanup deletes it.
	// Default 168h (7 days).
	UndoTTL time.Duration `yaml:"undo_ttl"`
}

func defaultImport() Import {
	return Import{MaxUploadBytes: 100 << 20, MaxUncompressedBytes: 1 << 30, MaxRows: 1_000_000, BatchSize: 1000, MaxConcurrentUploads: 4,
		MaxEntries: 10_000, MaxCellChars: 32_767, MaxColumns: 16_384, MaxRowBytes: 8 << 20, MaxSharedStrings: 1 << 24,
		ReportTTL: 7 * 24 * time.Hour, UndoTTL: 7 * 24 * time.Hour}
}

// validate checks the upload and file limits.
func (im Import) validate(bad func(string, ...any)) {
	if im.MaxConcurrentUploads < 1 {
		bad("import.max_concurrent_uploads must be at least 1, got %d", im.MaxConcurrentUploads)
	}
	if im.MaxUploadBytes < 1<<10 {
		bad("import.max_upload_bytes must be at least 1024, got %d", im.MaxUploadBytes)
	}
	if im.MaxUncompressedBytes < im.MaxUploadBytes {
		bad("import.max_uncompressed_bytes (%d) must be at least import.max_upload_bytes (%d)", im.MaxUncompressedBytes, im.MaxUploadBytes)
	}
	if im.MaxRows < 1 || im.MaxRows > 1_048_575 {
		bad("import.max_rows must be between 1 and 1048575 (an .xlsx sheet's limit), got %d", im.MaxRows)
	}
	if im.MaxEntries < 1 || im.MaxCellChars < 1 || im.MaxColumns < 1 || im.MaxColumns > 16_384 || im.MaxRowBytes < 1<<10 || im.MaxSharedStrings < 1 {
		bad("import.max_entries, max_cell_chars, max_shared_strings must be positive, max_columns 1..16384, max_row_bytes at least 1024")
	}
	if im.BatchSize < 1 || im.BatchSize > 10_000 {
		bad("import.batch_size must be between 1 and 10000, got %d", im.BatchSize)
	}
	if im.ReportTTL <= 0 {
		bad("import.report_ttl must be positive, e.g. 168h")
	}
	if im.UndoTTL <= 0 {
		bad("import.undo_ttl must be positive, e.g. 168h")
	}
}
