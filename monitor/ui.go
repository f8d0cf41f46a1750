package monitor

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// asynqmon's page, as built, asks for two Google Fonts style sheets and a web-app manifest.
// The fonts make every console visit leave the machine (and fail, with console errors, where
// the machine has no way out); the manifest is fetched by the browser without credentials,
// so behind the console's sign-in it is a 401, twice per page, and its icons point outside
// the console's path. The console needs neither: its icons are SVG and its type falls back
// to the system sans-serif; it is not an installable app. offlinePage drops those links, and
// every console answer carries a Content-Security-Policy that lets the page load only from
// this origin.
var (
	dropLink     = regexp.MustCompile(`<link rel="(?:stylesheet|manifest)" href="(?:https?://[^"]*|[^"]*/manifest\.json)"/?>`)
	inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)
)

// consolePolicy is the console's Content-Security-Policy. Scripts: the bundle from this
// origin and the page's own inline scripts by hash (scriptHashes). Styles may be inline:
// the console's components (Material UI) write their styles into the page at run time.
func consolePolicy(scriptHashes []string) string {
	script := "script-src 'self'"
	for _, h := range scriptHashes {
		script += " '" + h + "'"
	}
	return "default-src 'none'; " + script + "; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
		"font-src 'self' data:; connect-src 'self'; manifest-src 'none'; form-action 'self'; " +
		"frame-ancestors 'none'; base-uri 'none'"
}

// secureHeaders sets what every console answer carries: no framing, no sniffing, no
// referrer outside the origin, and the policy without inline scripts (the page itself
// replaces it with one that names its scripts).
func secureHeaders(h http.Header) {
	h.Set("Content-Security-Policy", consolePolicy(nil))
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
}

// offlinePage serves next (asynqmon's UI) behind the console's Handler (which set
// secureHeaders) with its HTML page rewritten: no links that leave
// the machine or that the browser fetches without credentials, and a policy naming the
// page's inline scripts by hash. Everything else passes through untouched.
func offlinePage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead || strings.HasPrefix(r.URL.Path, ConsolePath+"/api/") ||
			strings.HasPrefix(r.URL.Path, ConsolePath+"/static/") {
			next.ServeHTTP(w, r)
			return
		}
		buf := &bufferedAnswer{header: http.Header{}}
		next.ServeHTTP(buf, r)
		body := buf.body.Bytes()
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		if buf.status == 0 || buf.status == http.StatusOK {
			if isHTML(buf.header, body) {
				body = dropLink.ReplaceAll(body, nil)
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.Header().Set("Content-Security-Policy", consolePolicy(scriptHashes(body)))
			}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(max(buf.status, http.StatusOK))
		if r.Method != http.MethodHead {
			w.Write(body) //nolint:errcheck // the client went away
		}
	})
}

// isHTML reports whether an answer is a page: asynqmon writes its page without a
// Content-Type, so the body is sniffed as net/http would.
func isHTML(h http.Header, body []byte) bool {
	ct := h.Get("Content-Type")
	if ct == "" {
		ct = http.DetectContentType(body)
	}
	return strings.HasPrefix(ct, "text/html")
}

// scriptHashes are the CSP source expressions of the page's inline scripts.
func scriptHashes(page []byte) []string {
	var out []string
	for _, m := range inlineScript.FindAllSubmatch(page, -1) {
		sum := sha256.Sum256(m[1])
		out = append(out, "sha256-"+base64.StdEncoding.EncodeToString(sum[:]))
	}
	return out
}

// bufferedAnswer holds an answer so that it can be rewritten before it is sent.
type bufferedAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedAnswer) Header() http.Header { return b.header }

func (b *bufferedAnswer) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *bufferedAnswer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
