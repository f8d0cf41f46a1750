package importer

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Row messages have one canonical form, English, which is what task_items, first_errors in
// the task result, the logs and the database hold ("phone: must be 11 digits starting with
// 1"). They are put into the reader's language when shown: the error report, first_errors
// in the task view. Each message is declared once below with both wordings; the validator
// writes its English from the same declaration the translator parses it with, so the two
// cannot drift apart, and rows stored before a message existed still read (a text no
// declaration matches is shown as it is). Storing a code and arguments instead would need a
// new column and would leave every stored row, and every reader of the stored text, behind.

// Lang is a language reports and row messages are written in.
type Lang string

// Languages of reports and messages.
const (
	LangEN Lang = "en"
	LangZH Lang = "zh"
)

// ParseLang reads a language: "zh", "zh-CN", "zh-Hans"… are Chinese, anything else English.
// An Accept-Language header is read by its preferred tag.
func ParseLang(s string) Lang {
	best, bestQ := LangEN, -1.0
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
			l = LangZH
		case tag == "en" || strings.HasPrefix(tag, "en-") || strings.HasPrefix(tag, "en_"):
			l = LangEN
		default:
			continue
		}
		if q > bestQ {
			best, bestQ = l, q
		}
	}
	return best
}

// message is one row message in both languages. Templates hold {1}, {2}… for arguments:
// numbers, values from the file.
type message struct {
	en, zh string
	re     *regexp.Regexp // en, with each argument a group; matches a prefix up to "; " or the end
}

func defMessage(en, zh string) *message {
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
	return &message{en: en, zh: zh, re: regexp.MustCompile(re.String())}
}

// text is the canonical (English) text of the message with args.
func (m *message) text(args ...string) string { return fill(m.en, args) }

func fill(tmpl string, args []string) string {
	for i, a := range args {
		tmpl = strings.ReplaceAll(tmpl, "{"+strconv.Itoa(i+1)+"}", a)
	}
	return tmpl
}

const (
	levelRuleEN = "must be normal, silver, gold, platinum or diamond (普通, 白银, 黄金, 铂金, 钻石)"
	levelRuleZH = "必须是 普通、白银、黄金、铂金 或 钻石（normal、silver、gold、platinum、diamond）"
	codeRuleEN  = "must be 1 to 32 letters, digits, '-' or '_'"
	codeRuleZH  = "必须是 1 到 32 个字母、数字、“-”或“_”"
	phoneRuleEN = "must be 11 digits starting with 1"
	phoneRuleZH = "必须是以 1 开头的 11 位数字"
	cutEN       = " (this one has more than {1})"
	cutZH       = "（此处超过 {1} 个字符）"
)

// The row messages.
var (
	msgRequired  = defMessage("is required", "必填")
	msgCode      = defMessage(codeRuleEN+", starting with a letter or digit", codeRuleZH+"，并以字母或数字开头")
	msgPhone     = defMessage(phoneRuleEN, phoneRuleZH)
	msgEmail     = defMessage("is not a valid email address", "不是有效的邮箱地址")
	msgLevel     = defMessage(levelRuleEN, levelRuleZH)
	msgTooLong   = defMessage("must be at most {1} characters (this one has {2})", "最多 {1} 个字符（此处有 {2} 个）")
	msgRounded   = defMessage("{1} is a rounded number; format the column as text and enter all 11 digits", "{1} 是被四舍五入的数字；请把该列设为文本格式，并填写完整的 11 位号码")
	msgDuplicate = defMessage("{1} already appears in row {2}", "{1} 已在第 {2} 行出现")
	msgExists    = defMessage("{1} already exists", "{1} 已存在")
	msgCutCode   = defMessage(codeRuleEN+cutEN, codeRuleZH+cutZH)
	msgCutPhone  = defMessage(phoneRuleEN+cutEN, phoneRuleZH+cutZH)
	msgCutLevel  = defMessage(levelRuleEN+cutEN, levelRuleZH+cutZH)
	msgCutText   = defMessage("must be at most {1} characters (this one has more than {2})", "最多 {1} 个字符（此处超过 {2} 个字符）")
	// An undo's conflicts: customers it left alone.
	msgChangedSince = defMessage("{1} was changed after the import; left as it is", "{1} 在导入之后又被修改，保持现状")
	msgDeletedSince = defMessage("{1} was deleted after the import; not restored", "{1} 在导入之后被删除，未恢复")
	msgAddedSince   = defMessage("{1} was added again after the import removed it; left as it is", "{1} 被导入删除后又被重新添加，保持现状")
	allMessages     = sortedMessages(msgRequired, msgCode, msgPhone, msgEmail, msgLevel, msgTooLong, msgRounded, msgDuplicate, msgExists, msgCutCode, msgCutPhone, msgCutLevel, msgCutText,
		msgChangedSince, msgDeletedSince, msgAddedSince)
	reportHeaders = map[Lang][3]string{LangEN: {"row", "field", "reason"}, LangZH: {"行号", "字段", "原因"}}
)

// sortedMessages orders messages for parsing: the longest fixed text first, so "must be at
// most 100 characters (this one has more than 32,767)" is not read as the shorter message
// with "more than 32,767" for its count.
func sortedMessages(ms ...*message) []*message {
	fixed := func(m *message) int { return len(regexp.MustCompile(`\{\d+\}`).ReplaceAllString(m.en, "")) }
	slices.SortStableFunc(ms, func(a, b *message) int { return cmp.Compare(fixed(b), fixed(a)) })
	return ms
}

// fieldLabel is a field's name in lang.
func fieldLabel(name string, lang Lang) string {
	if lang != LangZH {
		return name
	}
	for f, n := range fieldNames {
		if n == name {
			return chineseNames[f]
		}
	}
	return name
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

// TranslateMessage puts a stored row message ("phone: must be …; email: …") into lang. A
// part no declared message matches is kept as written.
func TranslateMessage(msg string, lang Lang) string {
	if lang != LangZH {
		return msg
	}
	var out []string
	rest := msg
	for rest != "" {
		name, after, ok := strings.Cut(rest, ": ")
		label := fieldLabel(name, lang)
		if !ok || label == name || strings.Contains(name, " ") {
			out = append(out, rest)
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
			out = append(out, label+"："+fill(m.zh, args))
			rest, matched = after[loc[1]:], true
			break
		}
		if !matched {
			out = append(out, label+"："+after)
			break
		}
	}
	return strings.Join(out, "；")
}

// TranslateRowError puts a first_errors entry ("row 128, phone: must be …") into lang.
func TranslateRowError(s string, lang Lang) string {
	if lang != LangZH {
		return s
	}
	if rest, ok := strings.CutPrefix(s, "row "); ok {
		if n, msg, ok := strings.Cut(rest, ", "); ok && strings.Trim(n, "0123456789") == "" {
			return "第 " + n + " 行，" + TranslateMessage(msg, lang)
		}
	}
	return TranslateMessage(s, lang)
}
