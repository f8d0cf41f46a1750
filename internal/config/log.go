package config

// Log selects the log output.
type Log struct {
	// Format is "json" or "text". Default "json".
	Format string `yaml:"format"`
	// Level is debug, info, warn or error. Default "info".
	Level string `yaml:"level"`
}
