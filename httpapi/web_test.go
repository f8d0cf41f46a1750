package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/httpapi/live"
	"github.com/taskcenter/taskcenter/store/audit"
)

const pageOrigin = "http://api.test"

// signIn posts the sign-in form from the page's origin and returns the answer.
func (s *streamEnv) signIn(token string, headers ...string) *httptest.ResponseRecorder {
	s.t.Helper()
	h := append([]string{"Content-Type", "application/x-www-form-urlencoded", "Origin", pageOrigin}, headers...)
	return s.call("POST", "/login", "", strings.NewReader(url.Values{"token": {token}, "next": {"/tasks/x"}}.Encode()), h...)
}

// session signs in and returns the cookie header and the page's CSRF token.
func (s *streamEnv) session(token string) (cookie, csrf string) {
	s.t.Helper()
	rec := s.signIn(token)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/tasks/x" {
		s.t.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	ck := rec.Result().Cookies()[0]
	page := s.call("GET", "/", "", nil, "Cookie", ck.Name+"="+ck.Value)
	m := regexp.MustCompile(`"csrf":"([^"]+)"`).FindStringSubmatch(page.Body.String())
	if page.Code != http.StatusOK || m == nil {
		s.t.Fatalf("the page after sign-in: %d %s", page.Code, page.Body)
	}
	return ck.Name + "=" + ck.Value, m[1]
}

func TestWebSignInSetsAStrictHttpOnlySignedSessionCookie(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{})
	if rec := s.signIn("not-a-token-at-all-000"); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "not valid") {
		t.Fatalf("a wrong token: %d", rec.Code)
	}
	rec := s.signIn(aliceToken)
	cks := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cks) != 1 {
		t.Fatalf("sign-in: %d %v", rec.Code, cks)
	}
	ck := cks[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.MaxAge != int((12*time.Hour).Seconds()) {
		t.Fatalf("cookie attributes: %+v", ck)
	}
	id, sig, ok := strings.Cut(ck.Value, ".")
	if !ok || len(id) != 43 || sig == "" || strings.Contains(ck.Value, aliceToken) {
		t.Fatalf("the cookie is not a signed opaque id: %q", ck.Value)
	}
	// Redis holds only the id's hash.
	keys, _ := s.rdb.Keys(context.Background(), "taskcenter:web:session:*").Result()
	if len(keys) != 1 || strings.Contains(keys[0], id) {
		t.Fatalf("session keys %v", keys)
	}
	// A changed signature is refused without a session.
	forged := ck.Name + "=" + id + ".AAAA"
	if rec := s.call("GET", "/api/v1/tasks", "", nil, "Cookie", forged); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a forged signature: %d", rec.Code)
	}
	// Signing in from another site is refused (login CSRF).
	if rec := s.call("POST", "/login", "", strings.NewReader("token="+aliceToken), "Content-Type", "application/x-www-form-urlencoded",
		"Origin", "http://evil.test"); rec.Code != http.StatusForbidden {
		t.Fatalf("a cross-site sign-in: %d", rec.Code)
	}
}

func TestCookieSessionsActAsTheUserAndStateChangesNeedCSRF(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{})
	bobTask := s.submit(t, bobToken)
	cookie, csrf := s.session(aliceToken)

	// Reads with the cookie are alice's, and only alice's.
	if rec := s.call("GET", "/api/v1/tasks/"+bobTask.TaskNo, "", nil, "Cookie", cookie); rec.Code != http.StatusNotFound {
		t.Fatalf("bob's task with alice's cookie: %d", rec.Code)
	}
	body := `{"type":"customers"}`
	post := func(headers ...string) *httptest.ResponseRecorder {
		return s.call("POST", "/api/v1/exports", "", strings.NewReader(body), append([]string{"Cookie", cookie, "Content-Type", "application/json"}, headers...)...)
	}
	for name, headers := range map[string][]string{
		"no origin, no token":      nil,
		"origin but no token":      {"Origin", pageOrigin},
		"origin and a wrong token": {"Origin", pageOrigin, "X-Csrf-Token", csrf + "x"},
		"another site's origin":    {"Origin", "http://evil.test", "X-Csrf-Token", csrf},
		// What a browser sends on another site's form or script, whatever else it sends.
		"fetched by another site": {"Sec-Fetch-Site", "cross-site", "Referer", "http://evil.test/page", "X-Csrf-Token", csrf},
	} {
		rec := post(headers...)
		if rec.Code != http.StatusForbidden || problemOf(t, rec).Code != "csrf_failed" {
			t.Fatalf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	// Each refusal is in the audit trail under the session's user, not an empty actor.
	refused, _, err := s.srv.Store.ListAudit(context.Background(), audit.Filter{Outcome: audit.Denied, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	csrfRows := 0
	for _, e := range refused {
		if strings.HasPrefix(e.Detail, "csrf_failed") {
			csrfRows++
			if e.Actor != "alice" {
				t.Errorf("a CSRF refusal recorded with actor %q, want alice", e.Actor)
			}
		}
	}
	if csrfRows != 5 {
		t.Errorf("%d CSRF refusals in the audit trail, want 5", csrfRows)
	}
	rec := post("Origin", pageOrigin, "X-Csrf-Token", csrf)
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `"owner":"alice"`) {
		t.Fatalf("a page request: %d %s", rec.Code, rec.Body)
	}
	if rec := post("Sec-Fetch-Site", "same-origin", "X-Csrf-Token", csrf); rec.Code != http.StatusOK && rec.Code != http.StatusAccepted {
		t.Fatalf("a page request a browser marks same-origin: %d %s", rec.Code, rec.Body)
	}
	// Not a browser's request (no Sec-Fetch-Site, no Origin) but holding the page's token:
	// only the page could have read it, so it passes (net/http.CrossOriginProtection).
	if rec := post("X-Csrf-Token", csrf); rec.Code != http.StatusOK && rec.Code != http.StatusAccepted {
		t.Fatalf("the page's token without browser headers: %d %s", rec.Code, rec.Body)
	}
	// The bearer API is unchanged: no CSRF token, no origin.
	if rec := s.callJSON("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"city": "x"}}); rec.Code != http.StatusAccepted {
		t.Fatalf("bearer submit: %d %s", rec.Code, rec.Body)
	}
	// A bearer header wins over a cookie: a wrong one is 401 even with a good cookie.
	if rec := s.call("GET", "/api/v1/tasks", "wrong-token-0000000000", nil, "Cookie", cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong bearer with a good cookie: %d", rec.Code)
	}

	// Sign-out needs the token too, then ends the session on the server.
	if rec := s.call("POST", "/logout", "", strings.NewReader("csrf=nope"), "Cookie", cookie, "Origin", pageOrigin,
		"Content-Type", "application/x-www-form-urlencoded"); rec.Code != http.StatusForbidden {
		t.Fatalf("sign-out without the token: %d", rec.Code)
	}
	if rec := s.call("POST", "/logout", "", strings.NewReader("csrf="+csrf), "Cookie", cookie, "Origin", pageOrigin,
		"Content-Type", "application/x-www-form-urlencoded"); rec.Code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d %s", rec.Code, rec.Body)
	}
	if rec := s.call("GET", "/api/v1/tasks", "", nil, "Cookie", cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("the cookie after sign-out: %d", rec.Code)
	}
	if rec := s.call("GET", "/", "", nil, "Cookie", cookie); rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/login") {
		t.Fatalf("the page after sign-out: %d", rec.Code)
	}
}

func TestWebSignInIsThrottledPerAddress(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{})
	for range 5 {
		s.signIn("wrong-token-00000000000")
	}
	if rec := s.signIn("wrong-token-00000000006"); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a sixth wrong try: %d", rec.Code)
	}
	// A valid token always passes: junk from the same address cannot lock its owner out.
	if rec := s.signIn(aliceToken); rec.Code != http.StatusSeeOther {
		t.Fatalf("alice's token after the junk: %d", rec.Code)
	}
}

func TestThePageSpeaksTheBrowsersLanguageAndLoadsNothingFromElsewhere(t *testing.T) {
	t.Parallel()
	s := newStreamAPI(t, live.Limits{})
	cookie, _ := s.session(aliceToken)
	for lang, want := range map[string]string{"zh-CN,zh;q=0.9,en;q=0.8": "我的任务", "en-US,en;q=0.9,zh;q=0.5": "My tasks", "fr-FR": "My tasks"} {
		rec := s.call("GET", "/", "", nil, "Cookie", cookie, "Accept-Language", lang)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("Accept-Language %s: %d, want %q", lang, rec.Code, want)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Fatalf("CSP %q", csp)
		}
	}
	// The switch is remembered.
	rec := s.call("GET", "/?lang=zh", "", nil, "Cookie", cookie)
	lc := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(lc) != 1 || lc[0].Value != "zh" {
		t.Fatalf("the switch: %d %v", rec.Code, lc)
	}
	if rec := s.call("GET", "/", "", nil, "Cookie", cookie+"; "+lc[0].Name+"=zh", "Accept-Language", "en"); !strings.Contains(rec.Body.String(), "我的任务") {
		t.Fatal("the remembered language is not used")
	}
	// (That every embedded file refers only to this server is httpapi/web's own test.)
	// Assets are served with the page's version.
	if rec := s.call("GET", "/assets/app.js?v="+s.srv.web.Version(), "", nil); rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
		t.Fatalf("app.js: %d %v", rec.Code, rec.Header())
	}
}
