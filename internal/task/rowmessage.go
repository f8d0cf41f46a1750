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
