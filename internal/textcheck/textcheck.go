// Package textcheck says what makes a free-text value unacceptable, in words a caller can put
// in front of the user: the API's parameters and the export filters share one rule.
package textcheck

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Problem says what makes v unacceptable as a text value, or "" when it is fine: it must be
// UTF-8 without control characters (Postgres text cannot hold NUL) and at most max characters.
func Problem(v string, max int) string {
	if !utf8.ValidString(v) {
		return "must be valid UTF-8"
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return "must not contain control characters"
	}
	if utf8.RuneCountInString(v) > max {
		return fmt.Sprintf("must be at most %d characters", max)
	}
	return ""
}

// maxEcho is how many characters of a rejected value Echo quotes back.
const maxEcho = 40

// Echo quotes a rejected value for an error message, shortened and made printable.
func Echo(v string) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	if r := []rune(v); len(r) > maxEcho {
		v = string(r[:maxEcho]) + "…"
	}
	return fmt.Sprintf("%q", v)
}

// SplitList splits repeated and comma-separated values (?status=a,b&status=c, --status a,b)
// into their parts, trimmed, leaving out the empty ones.
func SplitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}
