package httpapi

import (
	"cmp"
	"net/http"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/internal/msg"
)

// MessagesView is the message catalogue in one language: what a client says the API's
// {code, params} with (log lines, task and attempt errors as "error.<code>", problems as
// "problem.<code>", rejected rows).
type MessagesView struct {
	Lang string `json:"lang"`
	// Messages are the templates by code; {name} is a param, {name:kind} the entry
	// "<kind>.<param>" (kinds tried in turn when several, comma-separated), else the param
	// after a bar, else the param itself.
	Messages map[string]string `json:"messages"`
}

// listMessages answers GET /api/v1/messages?lang=zh|en (default the Accept-Language).
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, _ identity.Principal) error {
	lang := msg.ParseLang(cmp.Or(r.URL.Query().Get("lang"), r.Header.Get("Accept-Language")))
	w.Header().Set("Content-Language", string(lang))
	w.Header().Add("Vary", "Accept-Language")
	writeJSON(w, http.StatusOK, MessagesView{Lang: string(lang), Messages: msg.Texts(lang)})
	return nil
}
