// Package textcheck says what makes a free-text value unacceptable, as a message a caller can
// put in front of the user (in the user's language): the API's parameters and the export
// filters share one rule.
package textcheck

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/taskcenter/taskcenter/internal/msg"
)

// Problem says what makes v unacceptable as a text value, with bad true, or bad false when
// it is fine: it must be UTF-8 without control characters (Postgres text cannot hold NUL) and
// at most max characters.
func Problem(v string, max int) (m msg.Message, bad bool) {
	if !utf8.ValidString(v) {
		return msg.New("field_error.utf8"), true
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return msg.New("field_error.control_chars"), true
	}
	if utf8.RuneCountInString(v) > max {
		return msg.New("field_error.too_long", "max", strconv.Itoa(max)), true
	}
	return msg.Message{}, false
}

// OneOf says that a value must be one of choices (two or more), named as a person types
// them: "must be upsert, insert or replace".
func OneOf(choices ...string) msg.Message {
	n := len(choices) - 1
	return msg.New("field_error.one_of", "choices", strings.Join(choices[:n], ", "), "last", choices[n])
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
