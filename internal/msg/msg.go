// Package msg is what the product says to a person, as data: a message is a code and its
// params, stored and sent where it is produced, and rendered in the reader's language from
// one catalogue (catalogue.go) that holds every code with its English and 简体中文 template.
// Go renders with it (logs' English text, problem details, error reports, exported files);
// the web page receives the same catalogue and renders {code, params} in the viewer's
// language, so no surface translates English sentences back.
//
// Templates name their params: "imported {success} of {total} rows". A param may be read
// through the catalogue: {status:status} is the entry "status.<value>" (the value itself
// when there is none), so enum values are put into the reader's language too;
// {code:error,problem|error} is the entry "error.<code>", else "problem.<code>", else the
// param error. A param may hold a list, its items separated by spaces: {statuses:status*}
// reads each item through the catalogue and joins them with the language's separator
// ("list.sep": "FAILED TIMEOUT" is "Failed, Timed out", "失败、超时").
package msg

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Lang is a language the product speaks.
type Lang string

// The languages.
const (
	EN Lang = "en"
	ZH Lang = "zh"
)

// Langs lists the languages every catalogue entry is written in.
func Langs() []Lang { return []Lang{EN, ZH} }

// ParseLang reads a language: "zh", "zh-CN", "zh-Hans"… are Chinese, anything else English.
// An Accept-Language header is read by its preferred tag.
func ParseLang(s string) Lang {
	best, bestQ := EN, -1.0
	for part := range strings.SplitSeq(s, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		tag = strings.ToLower(tag)
		var l Lang
		switch {
		case tag == "zh" || strings.HasPrefix(tag, "zh-") || strings.HasPrefix(tag, "zh_"):
			l = ZH
		case tag == "en" || strings.HasPrefix(tag, "en-") || strings.HasPrefix(tag, "en_"):
			l = EN
		default:
			continue
		}
		if q > bestQ {
			best, bestQ = l, q
		}
	}
	return best
}

// Params are a message's values by name, as text (numbers as the product writes them).
type Params map[string]string

// Message is one thing said to a person: a catalogue code and its params.
type Message struct {
	Code   string `json:"code"`
	Params Params `json:"params,omitempty"`
}

// New is the message code with params given as name, value pairs.
func New(code string, nameValues ...string) Message {
	m := Message{Code: code}
	if len(nameValues) > 0 {
		m.Params = make(Params, len(nameValues)/2)
		for i := 0; i+1 < len(nameValues); i += 2 {
			m.Params[nameValues[i]] = nameValues[i+1]
		}
	}
	return m
}

// Plain is text the catalogue does not hold, said as it is in every language: the words of
// a task type that brings its own (a type declared outside this repository), or text from
// elsewhere. The product's own messages are never Plain.
func Plain(text string) Message { return New(CodePlain, "text", text) }

// CodePlain is Plain's code.
const CodePlain = "plain"

// English is the message in English: the text stored beside the code for old readers and
// sent as the API's message fields.
func (m Message) English() string { return Render(EN, m.Code, m.Params) }

// In is the message in lang.
func (m Message) In(lang Lang) string { return Render(lang, m.Code, m.Params) }

// Known reports whether code is in the catalogue.
func Known(code string) bool {
	_, ok := catalogue[code]
	return ok
}

// Text is the template of code in lang ("" when the catalogue has no such code).
func Text(lang Lang, code string) string {
	e, ok := catalogue[code]
	if !ok {
		return ""
	}
	if lang == ZH {
		return e.zh
	}
	return e.en
}

// Texts is the whole catalogue in lang, code → template: what the web page renders with.
func Texts(lang Lang) map[string]string {
	out := make(map[string]string, len(catalogue))
	for code := range catalogue {
		out[code] = Text(lang, code)
	}
	return out
}

// Codes lists the catalogue's codes, sorted.
func Codes() []string {
	out := make([]string, 0, len(catalogue))
	for code := range catalogue {
		out = append(out, code)
	}
	slices.Sort(out)
	return out
}

// placeholder is {name}, {name:kind}, {name:kind|fallback} or the list {name:kind*}.
var placeholder = regexp.MustCompile(`\{([a-z_0-9]+)(?::([a-z_,]+)(\*)?(?:\|([a-z_0-9]+))?)?\}`)

// codeListSep is the entry that joins the items of a list param.
const codeListSep = "list.sep"

// Render is the template of code in lang with params filled in; a code the catalogue lacks
// is shown as it is.
func Render(lang Lang, code string, params Params) string {
	tmpl, ok := catalogue[code]
	if !ok {
		return code
	}
	s := tmpl.en
	if lang == ZH {
		s = tmpl.zh
	}
	return fill(lang, s, params)
}

func fill(lang Lang, s string, params Params) string {
	if !strings.Contains(s, "{") {
		return s
	}
	return placeholder.ReplaceAllStringFunc(s, func(ph string) string {
		g := placeholder.FindStringSubmatch(ph)
		v, ok := params[g[1]]
		if !ok {
			return ph
		}
		if g[2] == "" {
			return v
		}
		if g[3] != "" {
			items := strings.Fields(v)
			for i, item := range items {
				items[i] = read(lang, g[2], item, params)
			}
			return strings.Join(items, Render(lang, codeListSep, nil))
		}
		if t, ok := entryOf(lang, g[2], v); ok {
			return fill(lang, t, params)
		}
		if g[4] != "" {
			if fb, ok := params[g[4]]; ok {
				return fb
			}
		}
		return v
	})
}

// read is the value v read through the first of kinds the catalogue has an entry of, or v.
func read(lang Lang, kinds, v string, params Params) string {
	if t, ok := entryOf(lang, kinds, v); ok {
		return fill(lang, t, params)
	}
	return v
}

// entryOf is the template of "<kind>.<v>" in lang for the first of kinds (comma-separated)
// the catalogue has it for.
func entryOf(lang Lang, kinds, v string) (string, bool) {
	for kind := range strings.SplitSeq(kinds, ",") {
		if e, ok := catalogue[kind+"."+v]; ok {
			if lang == ZH {
				return e.zh, true
			}
			return e.en, true
		}
	}
	return "", false
}

// Names lists the param names a template uses, in order of first use.
func Names(tmpl string) []string {
	var out []string
	for _, g := range placeholder.FindAllStringSubmatch(tmpl, -1) {
		for _, n := range []string{g[1], g[4]} {
			if n != "" && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

type entry struct{ en, zh string }
