package config

import (
	"time"
)

// Export tunes report exports.
type Export struct {
	// PageSize is the keyset page read per query. Default 2000.
	PageSize int `yaml:"page_size"`
	// ResultTTL is how long a result file can be downloaded. Default 168h (7 days).
	ResultTTL time.Duration `yaml:"result_ttl"`
	// MaxRows caps one export; an .xlsx sheet holds at most 1,048,575 data rows.
	// Default 1,000,000.
	MaxRows int `yaml:"max_rows"`
}

func defaultExport() Export {
	return Export{PageSize: 2000, ResultTTL: 7 * 24 * time.Hour, MaxRows: 1_000_000}
}

// validate checks the page size, the result's lifetime and the row cap.
func (e Export) validate(bad func(string, ...any)) {
	if e.PageSize < 1 || e.PageSize > 50_000 {
		bad("export.page_size must be between 1 and 50000, got %d", e.PageSize)
	}
	if e.ResultTTL <= 0 {
		bad("export.result_ttl must be positive, e.g. 168h")
	}
	if e.MaxRows < 1 || e.MaxRows > 1_048_575 {
		bad("export.max_rows must be between 1 and 1048575 (an .xlsx sheet's limit), got %d", e.MaxRows)
	}
}
