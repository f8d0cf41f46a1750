package request

import (
	"encoding/json"
	"net/http"
)

// WriteJSON answers with v as JSON (HTML characters left as they are).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) //nolint:errcheck // the client went away
}

// WriteItems answers 200 with a listing, {"items": [...]}: each row of list as view shows it.
func WriteItems[T, V any](w http.ResponseWriter, list []T, view func(*T) V) {
	out := struct {
		Items []V `json:"items"`
	}{Items: make([]V, len(list))}
	for i := range list {
		out.Items[i] = view(&list[i])
	}
	WriteJSON(w, http.StatusOK, out)
}
