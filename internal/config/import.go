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
}
