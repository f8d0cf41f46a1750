package monitor

import (
	"io"
	"log/slog"
	"strings"

	"github.com/taskcenter/taskcenter/internal/redact"
)

// NewLogger returns the process logger: JSON (or text) on w, durations written as "1.5s",
// and sensitive values masked in every line: secrets by attribute name, mobile numbers and
// the secrets inside URLs (a password, signed query values; scheme, host and port stay) in any
// text, and file paths outside dataDir in errors and in attributes that name a file or path
// (a URL path such as a route is not a file and is left alone).
func NewLogger(format, level string, w io.Writer, dataDir string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if redact.IsSecretKey(a.Key) {
			return slog.String(a.Key, "***")
		}
		switch a.Value.Kind() {
		case slog.KindDuration:
			return slog.String(a.Key, a.Value.Duration().String())
		case slog.KindString:
			if names(a.Key, "path", "file", "dir") {
				return slog.String(a.Key, redact.String(a.Value.String(), dataDir))
			}
			return slog.String(a.Key, redact.URLs(redact.Phones(a.Value.String())))
		case slog.KindAny:
			if err, ok := a.Value.Any().(error); ok {
				return slog.String(a.Key, redact.String(err.Error(), dataDir))
			}
		}
		return a
	}}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func names(key string, words ...string) bool {
	k := strings.ToLower(key)
	for _, w := range words {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}
