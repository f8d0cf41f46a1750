package main

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/taskcenter/taskcenter/internal/msg"
)

// langOf is the language tc speaks unless --lang says otherwise: TC_LANG, else the locale's
// (LC_ALL, LC_MESSAGES, LANG: the first one set, as POSIX reads them); English by default.
func langOf(getenv func(string) string) msg.Lang {
	for _, name := range []string{"TC_LANG", "LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := getenv(name); v != "" {
			return msg.ParseLang(v)
		}
	}
	return msg.EN
}

// say is the catalogue's message code in lang, with params given as name, value pairs.
func say(lang msg.Lang, code string, nameValues ...string) string {
	return msg.New(code, nameValues...).In(lang)
}

// sayOr is the catalogue's message code with params in lang, or english, the server's own
// words, when tc speaks English, when the catalogue lacks the code, or when the template
// names a param the server did not send.
func sayOr(lang msg.Lang, code string, params map[string]string, english string) string {
	if lang == msg.EN || !msg.Known(code) {
		return english
	}
	for _, name := range msg.Names(msg.Text(lang, code)) {
		if _, ok := params[name]; !ok {
			return english
		}
	}
	return msg.Render(lang, code, params)
}

// itoa is n as tc writes numbers.
func itoa[N int | int64](n N) string { return strconv.FormatInt(int64(n), 10) }

// span is a duration as tc writes it: Go's notation in English ("1m30s"), the catalogue's
// units in another language.
func span(lang msg.Lang, d time.Duration) string {
	if lang == msg.EN {
		return d.String()
	}
	if d < time.Second {
		return say(lang, "tc.milliseconds", "n", itoa(d.Milliseconds()))
	}
	var parts []string
	if h := int64(d / time.Hour); h > 0 {
		parts = append(parts, say(lang, "tc.hours", "n", itoa(h)))
	}
	if m := int64(d/time.Minute) % 60; m > 0 {
		parts = append(parts, say(lang, "tc.minutes", "n", itoa(m)))
	}
	if s := (d % time.Minute).Seconds(); s > 0 || len(parts) == 0 {
		parts = append(parts, say(lang, "tc.seconds", "n", strconv.FormatFloat(s, 'f', -1, 64)))
	}
	return strings.Join(parts, " ")
}

// listOf is parts joined as a list in lang ("a, b" in English).
func listOf(lang msg.Lang, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, say(lang, "tc.list_sep"))
}

// pad is s followed by spaces up to width columns of a terminal, where a Chinese character
// takes two; a negative width pads on the left.
func pad(s string, width int) string {
	cols := 0
	for _, r := range s {
		cols++
		if unicode.Is(unicode.Han, r) || (r >= 0xFF01 && r <= 0xFF60) || (r >= 0x3000 && r <= 0x303F) {
			cols++
		}
	}
	if width < 0 {
		return strings.Repeat(" ", max(-width-cols, 0)) + s
	}
	return s + strings.Repeat(" ", max(width-cols, 0))
}
