package task

import (
	"strconv"
	"strings"

	"github.com/taskcenter/taskcenter/internal/msg"
)

// In is why the row was rejected, in lang: "row 128, phone: must be …" (the text an
// import stores in English), "第 128 行，手机号：…". Every Go surface that says a rejected row
// (an import's error report, the API's first errors, tc) says it with this.
func (r RowMessage) In(lang msg.Lang) string {
	parts := make([]string, len(r.Parts))
	for i, p := range r.Parts {
		parts[i] = p.In(lang)
	}
	what := strings.Join(parts, msg.Render(lang, "row.sep", nil))
	if r.Row == 0 {
		return what
	}
	return msg.Render(lang, "row.at", msg.Params{"n": strconv.Itoa(r.Row), "what": what})
}

// In is what was wrong with the field, in lang: "phone: must be …".
func (p FieldMessage) In(lang msg.Lang) string {
	what := msg.Render(lang, p.Code, p.Params)
	if p.Field == "" {
		return what
	}
	return msg.Render(lang, "row.part", msg.Params{"field": p.Field, "what": what})
}

// Reason is a reason of an import's breakdown by field and reason as the message to say: the
// row message's code with its params when the group kept them (every row had the same), else
// the catalogue's "reason.<name>", the message without the rows' values ("already appears in
// an earlier row"). A message that names no values reads as it is. The error report and the
// API (and through it the page) say reasons with this.
func Reason(code string, params msg.Params) msg.Message {
	complete := true
	for _, n := range msg.Names(msg.Text(msg.EN, code)) {
		_, ok := params[n]
		complete = complete && ok
	}
	if generic := "reason." + strings.TrimPrefix(code, "row."); !complete && msg.Known(generic) {
		return msg.Message{Code: generic}
	}
	return msg.Message{Code: code, Params: params}
}
