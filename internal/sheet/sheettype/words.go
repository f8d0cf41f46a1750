package sheettype

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// ColumnName is the spreadsheet letter of a 0-based column: A, …, Z, AA, ….
func ColumnName(i int) string {
	name := ""
	for i++; i > 0; i = (i - 1) / 26 {
		name = string(rune('A'+(i-1)%26)) + name
	}
	return name
}

// Thousands writes n with thousands separators, 1,000,000, for messages about a file.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Clip shortens s to at most n bytes (and a "…") for a message quoting it, cutting between
// characters.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// LimitWords is a configured byte limit for people, exactly as set: "100 MB" for a whole
// number of MiB, "512 KB" for a whole number of KiB, else the bytes ("1,500,000 bytes"):
// never rounded down to a limit that was not set ("the 0 MB limit").
func LimitWords(n int64) string {
	number, unit := LimitParts(n)
	return number + " " + unit
}

// LimitParts is LimitWords as its number and its unit ("MB", "KB" or "bytes"), for a message
// that says the unit in the reader's language.
func LimitParts(n int64) (number, unit string) {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return Thousands(n >> 20), "MB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return Thousands(n >> 10), "KB"
	}
	return Thousands(n), "bytes"
}

// SizeWords is a measured byte count for people, rounded down: "8 MB", "1024 MB".
func SizeWords(n int64) string {
	if n >= 1<<20 {
		return Thousands(n>>20) + " MB"
	}
	if n >= 1<<10 {
		return Thousands(n>>10) + " KB"
	}
	return Thousands(n) + " bytes"
}
