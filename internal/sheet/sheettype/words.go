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

// SizeWords is a byte count for people: "8 MB", "1024 MB".
func SizeWords(n int64) string {
	if n >= 1<<20 {
		return Thousands(n>>20) + " MB"
	}
	if n >= 1<<10 {
		return Thousands(n>>10) + " KB"
	}
	return Thousands(n) + " bytes"
}
