package httpapi

import (
	"io"
	"net/http"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/problem"
)

// serveContent is http.ServeContent (ranges, conditional requests, HEAD) with its refusal of
// a range outside the file answered as a problem, like every other error, keeping the
// Content-Range that names the file's size.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, name string, modTime time.Time, content io.ReadSeeker) {
	http.ServeContent(&rangeRefusal{ResponseWriter: w, s: s, r: r}, r, name, modTime, content)
}

// rangeRefusal turns the standard library's text/plain 416 into problem+json.
type rangeRefusal struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	refused bool
}

func (w *rangeRefusal) WriteHeader(code int) {
	if code != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.refused = true
	w.s.writeError(w.ResponseWriter, w.r, problem.New(code, "range_not_satisfiable",
		"the Range header asks for bytes outside the file; Content-Range names its size"))
}

func (w *rangeRefusal) Write(p []byte) (int, error) {
	if w.refused {
		return len(p), nil // the standard library's text, replaced by the problem
	}
	return w.ResponseWriter.Write(p)
}

// redirect answers 302 to u with no body (a presigned download).
func redirect(w http.ResponseWriter, u string) {
	w.Header().Set("Location", u)
	w.WriteHeader(http.StatusFound)
}
