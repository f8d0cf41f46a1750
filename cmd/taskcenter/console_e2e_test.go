package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

var noRedirect = testenv.NoRedirects()

// consoleDo sends a console request with an optional session cookie or bearer token.
func consoleDo(t *testing.T, base, method, path string, cookie *http.Cookie, token string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return testenv.Send(t, noRedirect, req)
}

// Across two API replicas sharing Redis: a login works on both, a logout
// on one ends the session on both; failed logins are throttled.
func TestConsoleSessionsAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"TASKCENTER_CONSOLE_READ_ONLY": "true"})
	a, b := e.start("api"), e.start("api")

	res, _ := consoleDo(t, a.base, "POST", "/monitor/login", nil, "", url.Values{"token": {adminToken}})
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("login: %d %v", res.StatusCode, res.Cookies())
	}
	session := res.Cookies()[0]
	for name, p := range map[string]*proc{"a": a, "b": b} {
		if res, body := consoleDo(t, p.base, "GET", "/monitor/api/queues", session, "", nil); res.StatusCode != http.StatusOK {
			t.Fatalf("session on replica %s: %d %s", name, res.StatusCode, body)
		}
	}
	if res, _ := consoleDo(t, a.base, "POST", "/monitor/logout", session, "", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	for name, p := range map[string]*proc{"a": a, "b": b} {
		if res, _ := consoleDo(t, p.base, "GET", "/monitor/api/queues", session, "", nil); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the logged-out cookie on replica %s: %d", name, res.StatusCode)
		}
	}

	// Read-only: every change is refused and points to the task API.
	res, body := consoleDo(t, b.base, "DELETE", "/monitor/api/queues/exports/pending_tasks/tsk_X-a0", nil, adminToken, nil)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "/api/v1/tasks/{id}/cancel") {
		t.Fatalf("a change on a read-only console: %d %s", res.StatusCode, body)
	}

	// Failed logins from one address: after five, every further wrong token waits on every
	// replica, and the right token still signs in.
	for i := range 5 {
		if res, _ := consoleDo(t, a.base, "POST", "/monitor/login", nil, "", url.Values{"token": {"guess"}}); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, res.StatusCode)
		}
	}
	for name, p := range map[string]*proc{"a": a, "b": b} {
		res, _ := consoleDo(t, p.base, "POST", "/monitor/login", nil, "", url.Values{"token": {"guess"}})
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
			t.Fatalf("a wrong login on replica %s after five failures: %d %v", name, res.StatusCode, res.Header)
		}
		if res, _ := consoleDo(t, p.base, "POST", "/monitor/login", nil, "", url.Values{"token": {adminToken}}); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("the admin's login on replica %s after five failures: %d", name, res.StatusCode)
		}
	}
}
