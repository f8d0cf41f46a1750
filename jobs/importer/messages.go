package importer

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
)

// Row messages are catalogue messages (internal/msg, codes "row.*"): a rejected row keeps
// its problems as codes and params (task_items.messages, a result's first_error_messages),
// beside the English made from them (task_items.message, first_errors: "phone: must be 11
// digits starting with 1"), which the database and API clients read. Rows and results
// stored before the codes were kept have only the English: it is read back into code and
// params by the same templates (ParseMessage, ParseRowError), so they still read in every
// language, and a text no template matches is shown as it is.

// Lang is a language reports and row messages are written in.
type Lang = msg.Lang

// Languages of reports and messages.
const (
	LangEN = msg.EN
	LangZH = msg.ZH
)

// ParseLang reads a language: "zh", "zh-CN", "zh-Hans"… are Chinese, anything else English.
// An Accept-Language header is read by its preferred tag.
func ParseLang(s string) Lang { return msg.ParseLang(s) }

// message is one row message of the catalogue, with the pattern that reads its English back.
type message struct {
	code  string
	names []string       // its params, in the order text takes them
	re    *regexp.Regexp // its English, each param a group; matches a prefix up to "; " or the end
}

func defMessage(code string) *message {
	en := msg.Text(msg.EN, code)
	m := &message{code: code, names: msg.Names(en)}
	var re strings.Builder
	re.WriteString("^")
	for rest := en; rest != ""; {
		i := strings.Index(rest, "{")
		if i < 0 {
			re.WriteString(regexp.QuoteMeta(rest))
			break
		}
		j := strings.Index(rest[i:], "}")
		re.WriteString(regexp.QuoteMeta(rest[:i]))
		re.WriteString("(.+?)")
		rest = rest[i+j+1:]
	}
	re.WriteString("(?:; |$)")
	m.re = regexp.MustCompile(re.String())
	return m
}

// params are args by the message's param names (nil without args).
func (m *message) params(args []string) msg.Params {
	if len(args) == 0 {
		return nil
	}
	p := make(msg.Params, len(args))
	for i, a := range args {
		if i < len(m.names) {
			p[m.names[i]] = a
		}
	}
	return p
}

// text is the canonical (English) text of the message with args, in the order of its params.
func (m *message) text(args ...string) string { return msg.Render(msg.EN, m.code, m.params(args)) }

// of is the message with args said of field: one part of a rejected row.
func (m *message) of(field string, args ...string) task.FieldMessage {
	return task.FieldMessage{Field: field, Code: m.code, Params: m.params(args)}
}

// in is the message with args in lang.
func (m *message) in(lang Lang, args ...string) string {
	return msg.Render(lang, m.code, m.params(args))
}

// The row messages.
var (
	msgRequired  = defMessage("row.required")
	msgCode      = defMessage("row.code")
	msgPhone     = defMessage("row.phone")
	msgEmail     = defMessage("row.email")
	msgLevel     = defMessage("row.level")
	msgTooLong   = defMessage("row.too_long")
	msgRounded   = defMessage("row.rounded")
	msgDuplicate = defMessage("row.duplicate")
	msgExists    = defMessage("row.exists")
	msgCutCode   = defMessage("row.cut_code")
	msgCutPhone  = defMessage("row.cut_phone")
	msgCutLevel  = defMessage("row.cut_level")
	msgCutText   = defMessage("row.cut_text")
	// An undo's conflicts: customers it left alone.
	msgChangedSince = defMessage("row.changed_since")
	msgDeletedSince = defMessage("row.deleted_since")
	msgAddedSince   = defMessage("row.added_since")
	allMessages     = sortedMessages(msgRequired, msgCode, msgPhone, msgEmail, msgLevel, msgTooLong, msgRounded, msgDuplicate, msgExists, msgCutCode, msgCutPhone, msgCutLevel, msgCutText,
		msgChangedSince, msgDeletedSince, msgAddedSince)
)

// reportHeaders are the error report's column titles in lang.
func reportHeaders(lang Lang) [3]string {
	return [3]string{msg.Render(lang, "report.row", nil), msg.Render(lang, "report.field", nil), msg.Render(lang, "report.reason", nil)}
}

// sortedMessages orders messages for parsing: the longest fixed text first, so "must be at
// most 100 characters (this one has more than 32,767)" is not read as the shorter message
// with "more than 32,767" for its count.
func sortedMessages(ms ...*message) []*message {
	fixed := func(m *message) int {
		return len(regexp.MustCompile(`\{[a-z_0-9]+\}`).ReplaceAllString(msg.Text(msg.EN, m.code), ""))
	}
	slices.SortStableFunc(ms, func(a, b *message) int { return cmp.Compare(fixed(b), fixed(a)) })
	return ms
}

// fieldLabel is a field's name in lang (the catalogue's "field.<name>"); a name that is
// not a field is kept as it is.
func fieldLabel(name string, lang Lang) string {
	if !msg.Known("field." + name) {
		return name
	}
	return msg.Render(lang, "field."+name, nil)
}

// TranslateFields puts a comma-separated list of field names ("phone,email") into lang.
func TranslateFields(fields string, lang Lang) string {
	if lang != LangZH || fields == "" {
		return fields
	}
	parts := strings.Split(fields, ",")
	for i, p := range parts {
		parts[i] = fieldLabel(p, lang)
	}
	return strings.Join(parts, ",")
}

// ParseMessage reads a stored row message ("phone: must be …; email: …") back into its
// parts, each a field and a catalogue message; a part no row message matches is kept as
// written (msg.Plain). It is for rows stored before their messages were kept
// (task_items.messages NULL): a row stored since carries its parts (store.Item Messages).
func ParseMessage(text string) []task.FieldMessage {
	var out []task.FieldMessage
	rest := text
	for rest != "" {
		name, after, ok := strings.Cut(rest, ": ")
		if !ok || strings.Contains(name, " ") || !msg.Known("field."+name) {
			out = append(out, plainPart("", rest))
			break
		}
		matched := false
		for _, m := range allMessages {
			loc := m.re.FindStringSubmatchIndex(after)
			if loc == nil {
				continue
			}
			args := make([]string, 0, len(loc)/2-1)
			for g := 1; g < len(loc)/2; g++ {
				args = append(args, after[loc[2*g]:loc[2*g+1]])
			}
			out = append(out, task.FieldMessage{Field: name, Code: m.code, Params: m.params(args)})
			rest, matched = after[loc[1]:], true
			break
		}
		if !matched {
			out = append(out, plainPart(name, after))
			break
		}
	}
	return out
}

func plainPart(field, text string) task.FieldMessage {
	m := msg.Plain(text)
	return task.FieldMessage{Field: field, Code: m.Code, Params: m.Params}
}

// ParseRowError reads a first_errors entry ("row 128, phone: must be …") back into its row
// and parts, for a result written before it kept its first_error_messages.
func ParseRowError(s string) task.RowMessage {
	if rest, ok := strings.CutPrefix(s, "row "); ok {
		if n, m, ok := strings.Cut(rest, ", "); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			row, _ := strconv.Atoi(n)
			return task.RowMessage{Row: row, Parts: ParseMessage(m)}
		}
	}
	return task.RowMessage{Parts: ParseMessage(s)}
}

// renderParts is a row message's parts in lang.
func renderParts(parts []task.FieldMessage, lang Lang) string {
	return task.RowMessage{Parts: parts}.In(lang)
}

// reasonIn is a reason of the breakdown by field and reason in lang (task.Reason).
func reasonIn(code string, params msg.Params, lang Lang) string {
	return task.Reason(code, params).In(lang)
}
