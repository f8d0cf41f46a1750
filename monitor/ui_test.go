package monitor

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The console's page asks for nothing outside this origin, no manifest the browser would
// fetch without credentials, and its policy names exactly the page's inline scripts; the
// sign-in page and the refusals carry the same protections.
func TestConsolePageStaysOnThisMachine(t *testing.T) {
	t.Parallel()
	c := newConsoleEnv(t).console(ConsoleConfig{ReadOnly: true})
	for _, path := range []string{ConsolePath + "/", ConsolePath + "/queues/imports", ConsolePath + "/servers"} {
		rec := send(c, "GET", path, here, bearer(consoleAdmin), nil)
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, `<div id="root">`) {
			t.Fatalf("%s: %d %.200s", path, rec.Code, body)
		}
		if m := regexp.MustCompile(`(?:href|src)="(https?:)?//[^"]*"`).FindString(body); m != "" {
			t.Errorf("%s asks for %s", path, m)
		}
		if strings.Contains(body, "manifest.json") || strings.Contains(body, "fonts.googleapis") {
			t.Errorf("%s still links the manifest or the fonts", path)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		hashes := scriptHashes([]byte(body))
		if len(hashes) != 2 {
			t.Fatalf("%s: %d inline scripts, want asynqmon's 2", path, len(hashes))
		}
		for _, h := range hashes {
			if !strings.Contains(csp, "'"+h+"'") {
				t.Errorf("%s: policy %q does not name the inline script %s", path, csp, h)
			}
		}
		if !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-eval") || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, rec.Header())
		}
		if got := rec.Header().Get("Content-Length"); got == "" {
			t.Errorf("%s: no Content-Length", path)
		}
	}
	// The bundle passes through as asynqmon serves it.
	rec := send(c, "GET", ConsolePath+"/static/js/runtime-main.9fea6c1a.js", here, bearer(consoleAdmin), nil)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/javascript") {
		t.Fatalf("the bundle: %d %v", rec.Code, rec.Header())
	}
	for _, path := range []string{ConsolePath + "/login", ConsolePath + "/api/queues"} {
		rec := send(c, "GET", path, here, nil, nil)
		if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s (%d): headers %v", path, rec.Code, rec.Header())
		}
	}
}
