package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store/audit"
)

// proxied is the API behind a trusted proxy (httptest's peer, 192.0.2.1) with Redis: the
// bearer throttle and the page's sessions are on, and each call names its client in
// X-Forwarded-For.
type proxied struct {
	*apiEnv
}

// newProxiedAPI builds the API with Redis, behind the trusted proxy 192.0.2.1, its bearer
// throttle allowing failures refusals per address and per credential per minute.
func newProxiedAPI(t *testing.T, failures int) *proxied {
	t.Helper()
	rd := testenv.NewRedis(t)
	gw, err := auth.NewGateway("", "", nil, []string{"192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	e := newAPI(t, func(d *Deps) {
		d.Redis, d.Auth.Gateway = rd.Client, gw
		d.Auth.Throttle = config.Throttle{Failures: failures, Window: time.Minute}
	})
	t.Cleanup(e.srv.Close)
	return &proxied{e}
}

// from calls the API as client (through the proxy) with token ("" for none).
func (p *proxied) from(client, method, target, token string, headers ...string) *httptest.ResponseRecorder {
	p.t.Helper()
	var body io.Reader
	if method != http.MethodGet && method != http.MethodDelete {
		body = strings.NewReader("{}")
	}
	return p.call(method, target, token, body, append([]string{"X-Forwarded-For", "203.0.113.250, " + client}, headers...)...)
}

// auditCount is how many rows the audit trail holds.
func (p *proxied) auditCount() int {
	p.t.Helper()
	var n int
	if err := p.pg.DB.QueryRow(`SELECT count(*) FROM audit_events`).Scan(&n); err != nil {
		p.t.Fatal(err)
	}
	return n
}

// countedRow is the one row of action from client, failing unless there is exactly one.
func (p *proxied) countedRow(action, client string) audit.Event {
	p.t.Helper()
	rows, _, err := p.st.ListAudit(context.Background(), audit.Filter{Action: action, Limit: 100})
	if err != nil {
		p.t.Fatal(err)
	}
	var mine []audit.Event
	for _, r := range rows {
		if r.ClientAddr == client {
			mine = append(mine, r)
		}
	}
	if len(mine) != 1 {
		p.t.Fatalf("%d rows of %s from %s, want 1: %+v", len(mine), action, client, mine)
	}
	return mine[0]
}

// Every route of the API's route table, refused every way it can be — no credential, a refused
// credential, a throttled attempt, a missing scope, a cross-site change with the page's cookie
// — leaves exactly one audit row per refusal: the refusals of nobody counted on one row per
// client address, minute and kind (count = the attempts), the refusals of somebody a row each
// under that somebody. A valid credential still passes from the throttled address.
func TestEveryRefusalOnEveryRouteIsAuditedOnce(t *testing.T) {
	t.Parallel()
	routes := apiRoutes()
	n := len(routes)
	p := newProxiedAPI(t, n)
	task := p.finishedExport(nil)
	fill := strings.NewReplacer("{id}", task.TaskNo, "{delivery}", "dlv_none")
	type op struct{ pattern, method, target string }
	var ops []op
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		ops = append(ops, op{rt.pattern, method, fill.Replace(path)})
	}

	// counted sends one request per route from addr with the credential cred(i) ("" for none),
	// each checked by answer, and returns the one counted row of action they added.
	counted := func(t *testing.T, addr, action string, cred func(i int) string, answer func(t *testing.T, o op, rec *httptest.ResponseRecorder)) audit.Event {
		t.Helper()
		testenv.FreshMinute(t, p.pg.DB)
		before := p.auditCount()
		for i, o := range ops {
			answer(t, o, p.from(addr, o.method, o.target, cred(i)))
		}
		if added := p.auditCount() - before; added != 1 {
			t.Fatalf("%d refusals added %d rows, want 1", n, added)
		}
		row := p.countedRow(action, addr)
		if row.Count != int64(n) || row.Outcome != audit.Denied {
			t.Fatalf("the counted row %+v, want %d denied attempts", row, n)
		}
		return row
	}
	unauthorized := func(t *testing.T, o op, rec *httptest.ResponseRecorder) {
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", o.pattern, rec.Code)
		}
	}

	t.Run("no credential: one counted row", func(t *testing.T) {
		row := counted(t, "198.51.100.1", audit.ActionNoCredential, func(int) string { return "" }, unauthorized)
		if row.Actor != "" || row.Via != "" || row.Status != 401 || !strings.HasPrefix(row.Detail, routes[0].pattern+": unauthorized") {
			t.Fatalf("the counted row %+v, want the first's detail", row)
		}
	})

	t.Run("a refused credential: one counted row, and the address is throttled at the limit", func(t *testing.T) {
		row := counted(t, "198.51.100.2", audit.ActionBadCredential, func(i int) string { return fmt.Sprintf("junk-token-%03d-000000", i) }, unauthorized)
		if row.Via != "bearer" || row.Status != 401 {
			t.Fatalf("the counted row %+v", row)
		}
	})

	t.Run("throttled: 429 with Retry-After on every route, one counted row", func(t *testing.T) {
		row := counted(t, "198.51.100.2", audit.ActionThrottled, func(i int) string { return fmt.Sprintf("more-junk-%03d-0000000", i) },
			func(t *testing.T, o op, rec *httptest.ResponseRecorder) {
				retry, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
				if pr := problemOf(t, rec); rec.Code != http.StatusTooManyRequests || pr.Code != "too_many_failures" || retry < 1 || retry > 60 {
					t.Fatalf("%s past the limit: %d %s Retry-After %q", o.pattern, rec.Code, pr.Code, rec.Header().Get("Retry-After"))
				}
			})
		if row.Via != "bearer" || row.Status != 429 {
			t.Fatalf("the counted row %+v", row)
		}
		// Junk from one client behind the proxy throttles that client, not the proxy's others.
		if res := p.from("198.51.100.3", "GET", "/api/v1/tasks", "junk-token-elsewhere-00"); res.Code != http.StatusUnauthorized {
			t.Fatalf("another client behind the proxy: %d, want its own 401", res.Code)
		}
		// A valid token passes from the throttled address.
		if res := p.from("198.51.100.2", "GET", "/api/v1/tasks", aliceToken); res.Code != http.StatusOK {
			t.Fatalf("alice's token from the throttled address: %d", res.Code)
		}
	})

	t.Run("a missing scope: a row per refusal, under the caller", func(t *testing.T) {
		readOnly := p.createToken(aliceToken, map[string]any{"name": "dashboards", "scopes": []string{"tasks:read"}}).Token
		writeOnly := p.createToken(aliceToken, map[string]any{"name": "submitter", "scopes": []string{"tasks:write"}}).Token
		for _, o := range ops {
			lacking := readOnly
			if routeScope(o.pattern) == auth.ScopeRead {
				lacking = writeOnly
			}
			before := p.auditCount()
			if res := p.from("198.51.100.4", o.method, o.target, lacking); res.Code != http.StatusForbidden {
				t.Fatalf("%s without its scope: %d", o.pattern, res.Code)
			}
			rows, _, _ := p.st.ListAudit(context.Background(), audit.Filter{Limit: 1})
			want := cmp.Or(auditAction(o.pattern), o.pattern)
			if added := p.auditCount() - before; added != 1 || rows[0].Actor != "alice" || rows[0].Action != want || rows[0].Status != 403 ||
				rows[0].ClientAddr != "198.51.100.4" || rows[0].Count != 1 {
				t.Fatalf("%s: %d rows added, the last %+v, want one of alice's %s", o.pattern, added, rows[0], want)
			}
		}
	})

	t.Run("a cross-site change with the page's cookie: a row per refusal, under the session's user", func(t *testing.T) {
		form := url.Values{"token": {aliceToken}, "next": {"/"}}.Encode()
		rec := p.call("POST", "/login", "", strings.NewReader(form), "Content-Type", "application/x-www-form-urlencoded", "Origin", pageOrigin)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
		}
		ck := rec.Result().Cookies()[0]
		cookie := ck.Name + "=" + ck.Value
		page := p.call("GET", "/", "", nil, "Cookie", cookie)
		csrf := regexp.MustCompile(`"csrf":"([^"]+)"`).FindStringSubmatch(page.Body.String())
		if csrf == nil {
			t.Fatalf("no CSRF token on the page: %s", page.Body)
		}
		changes := 0
		for _, o := range ops {
			if o.method == http.MethodGet {
				continue // reads change nothing: no CSRF check
			}
			changes++
			before := p.auditCount()
			res := p.from("198.51.100.5", o.method, o.target, "", "Cookie", cookie, "Origin", "http://evil.test", "X-Csrf-Token", csrf[1])
			if res.Code != http.StatusForbidden {
				t.Fatalf("%s from another site with alice's cookie: %d", o.pattern, res.Code)
			}
			rows, _, _ := p.st.ListAudit(context.Background(), audit.Filter{Limit: 1})
			if added := p.auditCount() - before; added != 1 || rows[0].Actor != "alice" || rows[0].Via != "session" ||
				!strings.HasPrefix(rows[0].Detail, "csrf_failed") || rows[0].ClientAddr != "198.51.100.5" {
				t.Fatalf("%s: %d rows added, the last %+v, want one of alice's csrf_failed", o.pattern, added, rows[0])
			}
		}
		if changes < 15 {
			t.Fatalf("only %d state-changing routes", changes)
		}
		// The page's own sign-out refused without its CSRF token: a row under alice too.
		before := p.auditCount()
		rec = p.call("POST", "/logout", "", strings.NewReader("csrf=nope"), "Cookie", cookie, "Origin", pageOrigin,
			"Content-Type", "application/x-www-form-urlencoded", "X-Forwarded-For", "198.51.100.5")
		rows, _, _ := p.st.ListAudit(context.Background(), audit.Filter{Limit: 1})
		if rec.Code != http.StatusForbidden || p.auditCount()-before != 1 || rows[0].Actor != "alice" || rows[0].Action != audit.ActionSignOut ||
			rows[0].Outcome != audit.Denied {
			t.Fatalf("a sign-out without the CSRF token: %d, last row %+v", rec.Code, rows[0])
		}
	})
}

// However much junk an address sends — to the API or to the page's sign-in — the admin's
// token from that address still passes; the junk is a counted row per kind.
func TestAValidCredentialPassesAfterFiftyJunkTokens(t *testing.T) {
	t.Parallel()
	p := newProxiedAPI(t, 5)
	testenv.FreshMinute(t, p.pg.DB)
	const shared = "198.51.100.60" // a NAT every client shares
	codes := map[int]int{}
	for i := range 50 {
		codes[p.from(shared, "GET", "/api/v1/tasks", fmt.Sprintf("junk-token-%03d-000000", i)).Code]++
	}
	if codes[http.StatusUnauthorized] != 5 || codes[http.StatusTooManyRequests] != 45 {
		t.Fatalf("50 junk tokens on /api: %v, want 5 × 401 then 45 × 429", codes)
	}
	if rec := p.from(shared, "GET", "/api/v1/tasks", adminToken); rec.Code != http.StatusOK {
		t.Fatalf("the admin's token on /api after the junk: %d", rec.Code)
	}
	signIn := func(token string) int {
		form := url.Values{"token": {token}, "next": {"/"}}.Encode()
		return p.call("POST", "/login", "", strings.NewReader(form), "Content-Type", "application/x-www-form-urlencoded",
			"Origin", pageOrigin, "X-Forwarded-For", shared).Code
	}
	codes = map[int]int{}
	for i := range 50 {
		codes[signIn(fmt.Sprintf("junk-token-%03d-000000", i))]++
	}
	if codes[http.StatusUnauthorized] != 5 || codes[http.StatusTooManyRequests] != 45 {
		t.Fatalf("50 junk sign-ins: %v, want 5 × 401 then 45 × 429", codes)
	}
	if code := signIn(adminToken); code != http.StatusSeeOther {
		t.Fatalf("the admin's sign-in after the junk: %d", code)
	}
	for _, c := range []struct {
		action, via string
		status      int
		count       int64
	}{
		{audit.ActionBadCredential, "bearer", 401, 5}, {audit.ActionSignIn, "token", 401, 5},
	} {
		rows, _, _ := p.st.ListAudit(context.Background(), audit.Filter{Action: c.action, Outcome: audit.Denied})
		if len(rows) != 1 || rows[0].Via != c.via || rows[0].Status != c.status || rows[0].Count != c.count || rows[0].ClientAddr != shared {
			t.Errorf("%s rows %+v, want one of %d attempts", c.action, rows, c.count)
		}
	}
	throttled, _, _ := p.st.ListAudit(context.Background(), audit.Filter{Action: audit.ActionThrottled, Outcome: audit.Denied})
	var got []string
	for _, r := range throttled {
		got = append(got, fmt.Sprintf("%s %s ×%d", r.ClientAddr, r.Via, r.Count))
	}
	if want := []string{shared + " token ×45", shared + " bearer ×45"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("throttled rows %q, want %q", got, want)
	}
}

// A token refused from as many addresses as the limit allows is throttled from every other
// address too; other tokens from those addresses are not.
func TestABearerTokenGuessedFromManyAddressesIsThrottledEverywhere(t *testing.T) {
	t.Parallel()
	p := newProxiedAPI(t, 3)
	const guessed = "a-token-many-bots-try-00"
	for i := range 3 {
		if rec := p.from(fmt.Sprint("198.51.100.", 70+i), "GET", "/api/v1/tasks", guessed); rec.Code != http.StatusUnauthorized {
			t.Fatalf("bot %d: %d", i, rec.Code)
		}
	}
	if rec := p.from("198.51.100.99", "GET", "/api/v1/tasks", guessed); rec.Code != http.StatusTooManyRequests || problemOf(t, rec).Code != "too_many_failures" {
		t.Fatalf("the guessed token from a fresh address: %d", rec.Code)
	}
	if rec := p.from("198.51.100.70", "GET", "/api/v1/tasks", "another-token-000000000"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("another token from a bot's address: %d", rec.Code)
	}
	// The throttle keeps a keyed hash of the credential, never the credential.
	keys, err := p.srv.Redis.Keys(context.Background(), "taskcenter:api:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("throttle keys %v %v", keys, err)
	}
	for _, k := range keys {
		if strings.Contains(k, "token") {
			t.Fatalf("a throttle key names the credential: %s", k)
		}
	}
}

// A sign-in through the company's provider is checked first too: callbacks the provider
// refused throttle their address, and a valid callback from that address still signs in.
func TestAProviderSignInPassesFromAThrottledAddress(t *testing.T) {
	t.Parallel()
	idp := testenv.NewIdP(t)
	rd := testenv.NewRedis(t)
	e := newAPI(t, func(d *Deps) {
		d.Redis = rd.Client
		d.Auth.OIDC = auth.NewProvider(auth.OIDCConfig{Issuer: idp.Issuer(), ClientID: idp.ClientID, ClientSecret: idp.ClientSecret,
			Scopes: []string{"openid", "profile", "email"}, UserClaim: "preferred_username"})
	})
	t.Cleanup(e.srv.Close)
	testenv.FreshMinute(t, e.pg.DB)
	codes := map[int]int{}
	for range 8 {
		codes[e.call("GET", "/auth/callback?error=access_denied&state=x", "", nil).Code]++
	}
	if codes[http.StatusUnauthorized] != 5 || codes[http.StatusTooManyRequests] != 3 {
		t.Fatalf("8 refused callbacks: %v, want 5 × 401 then 3 × 429", codes)
	}
	// The real thing, from the same address: to the provider and back.
	begin := e.call("GET", "/auth/login?next=/tasks", "", nil)
	if begin.Code != http.StatusFound {
		t.Fatalf("sign-in start: %d %s", begin.Code, begin.Body)
	}
	state := begin.Result().Cookies()[0]
	noRedirects := testenv.NoRedirects()
	res, err := noRedirects.Get(begin.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	if err != nil || back.Query().Get("code") == "" {
		t.Fatalf("the provider's answer: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	done := e.call("GET", "/auth/callback?"+back.RawQuery, "", nil, "Cookie", state.Name+"="+state.Value)
	// The callback opens the session and answers with this site's page that moves on to the
	// target (a redirect would end the provider's cross-site navigation without the Strict
	// cookie).
	if done.Code != http.StatusOK || !strings.Contains(done.Body.String(), `<meta http-equiv="refresh" content="0;url='/tasks'">`) ||
		!strings.Contains(strings.Join(done.Header().Values("Set-Cookie"), "\n"), "taskcenter_session=") {
		t.Fatalf("a valid callback from the throttled address: %d %v %s", done.Code, done.Header(), done.Body)
	}
	rows, _, _ := e.st.ListAudit(context.Background(), audit.Filter{Limit: 10})
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %s %s %d ×%d", r.Via, r.Action, r.Outcome, r.Status, r.Count))
	}
	want := []string{"oidc auth.sign_in success 200 ×1", "oidc auth.throttled denied 429 ×3", "oidc auth.sign_in denied 401 ×5"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit rows %q, want %q", got, want)
	}
}
