package config

import (
	"slices"
)

// Log selects the log output.
type Log struct {
	// Format is "json" or "text". Default "json".
	Format string `yaml:"format"`
	// Level is debug, info, warn or error. Default "info".
	Level string `yaml:"level"`
}

func defaultLog() Log { return Log{Format: "json", Level: "info"} }

// validate checks the format and the level.
func (l Log) validate(bad func(string, ...any)) {
	if l.Format != "json" && l.Format != "text" {
		bad("log.format must be json or text, got %q", l.Format)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, l.Level) {
		bad("log.level must be debug, info, warn or error, got %q", l.Level)
	}
}
