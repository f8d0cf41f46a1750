package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/outage"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
)

// The identity provider dies between a user's consent and the callback that brings the
// browser back. The code exchange cannot reach it: the callback answers 503 saying the
// company sign-in cannot be reached, and it is not a failed sign-in — however many such
// callbacks one address makes, the sign-in throttle (one failure allowed here) never blocks
// it, while a sign-in the provider refused still counts. The outage is the identity
// provider's: its tracker is down and logs it, a bearer JWT answers 503
// identity_provider_unavailable, and Postgres's tracker hears nothing of it.
func TestAProviderThatDiesBeforeTheCallbackIsAnOutageNotAFailedSignIn(t *testing.T) {
	t.Parallel()
	idp := testenv.NewIdP(t)
	rd := testenv.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: rd.Addr, DB: rd.DB})
	t.Cleanup(func() { rdb.Close() })
	var idpDep, pgDep *outage.Tracker
	e := newAPI(t, func(d *Deps) {
		idpDep, pgDep = outage.New("identity_provider", d.Logger, nil), outage.New("postgres", d.Logger, nil)
		d.Redis, d.Board = rdb, jobs.NewProgressBoard(rdb)
		d.Auth.OIDC = auth.NewProvider(auth.OIDCConfig{Issuer: idp.Issuer(), Audience: testenv.Audience, ClientID: idp.ClientID,
			ClientSecret: idp.ClientSecret, JWKSRefreshInterval: time.Second, Health: idpDep})
		d.Web.LoginFailures, d.Web.LoginWindow = 1, time.Minute
		d.IdentityProvider, d.Postgres = idpDep, pgDep
	})
	// login starts a browser sign-in: the provider's authorization URL and the callback's
	// state cookie.
	login := func() (authURL, cookie, state string) {
		t.Helper()
		rec := e.call("GET", "/auth/login?next=/", "", nil)
		loc, err := url.Parse(rec.Header().Get("Location"))
		if rec.Code != http.StatusFound || err != nil || len(rec.Result().Cookies()) != 1 {
			t.Fatalf("sign-in start: %d %s", rec.Code, rec.Body)
		}
		ck := rec.Result().Cookies()[0]
		return loc.String(), ck.Name + "=" + ck.Value, loc.Query().Get("state")
	}
	callback := func(cookie, query string) *httptest.ResponseRecorder {
		t.Helper()
		return e.call("GET", "/auth/callback?"+query, "", nil, "Cookie", cookie, "Accept-Language", "en")
	}

	authURL, cookie, state := login()
	code := testenv.Authorize(t, authURL) // the user consents at the provider...
	if err := idp.Shutdown(); err != nil {
		t.Fatal(err) // ...and the provider dies before the browser is back
	}
	rec := callback(cookie, url.Values{"code": {code}, "state": {state}}.Encode())
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cannot be reached right now") {
		t.Fatalf("the callback after the provider died: %d %s", rec.Code, rec.Body)
	}
	for i := range 3 { // more of them from the same address: never throttled
		_, cookie, state := login()
		if rec := callback(cookie, url.Values{"code": {"code-" + string(rune('a'+i))}, "state": {state}}.Encode()); rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("callback %d while the provider is down: %d, want 503 (not a counted failure)", i+2, rec.Code)
		}
	}
	if !idpDep.Down() || pgDep.Down() {
		t.Fatalf("down: identity provider %v, postgres %v", idpDep.Down(), pgDep.Down())
	}

	// A bearer JWT cannot be checked either (its keys were never fetched): 503 naming the
	// provider, counted as the provider's outage.
	jwt := testenv.Sign(t, idp.Key(), idp.Claims("alice"))
	rec = e.call("GET", "/api/v1/tasks", jwt, nil)
	if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != "identity_provider_unavailable" ||
		!strings.Contains(p.Detail, "identity provider cannot be reached") || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a JWT while the provider is down: %d %+v", rec.Code, p)
	}
	logs := e.logs.String()
	if strings.Count(logs, `"msg":"identity_provider is unreachable`) != 1 || strings.Contains(logs, "postgres is unreachable") ||
		strings.Contains(logs, "postgres unavailable") || pgDep.Down() {
		t.Fatalf("the outage is not the identity provider's alone:\n%s", logs)
	}

	// The audit trail has the sign-ins as errors of the provider, not as denied users.
	rec = e.call("GET", "/api/v1/audit?action=auth.sign_in", adminToken, nil)
	if rec.Code != http.StatusOK || strings.Count(rec.Body.String(), `"detail":"the identity provider cannot be reached"`) != 4 ||
		strings.Contains(rec.Body.String(), `"outcome":"denied"`) {
		t.Fatalf("the sign-ins' audit rows: %d %s", rec.Code, rec.Body)
	}

	// A sign-in the provider refused does count: with one failure allowed, the next
	// attempt from the address is throttled.
	if rec := callback(cookie, "error=access_denied"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a refused sign-in: %d", rec.Code)
	}
	if rec := callback(cookie, "error=access_denied"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("after a refused sign-in: %d, want 429", rec.Code)
	}
}
