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
