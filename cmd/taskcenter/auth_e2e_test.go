package main

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// Sign-in with the company's identity provider, against a real OpenID provider
// (mockoidc) running in the test process, and the real binary's run().

// companyIdP is the provider (testenv.IdP) with what this binary's tests need of it.
type companyIdP struct{ *testenv.IdP }

func newCompanyIdP(t *testing.T) companyIdP { return companyIdP{testenv.NewIdP(t)} }

// vars configures taskcenter for the provider.
func (p companyIdP) vars() map[string]string {
	return map[string]string{
		"TASKCENTER_AUTH_OIDC_ISSUER":                p.Issuer(),
		"TASKCENTER_AUTH_OIDC_AUDIENCE":              "taskcenter-api",
		"TASKCENTER_AUTH_OIDC_CLIENT_ID":             p.ClientID,
		"TASKCENTER_AUTH_OIDC_CLIENT_SECRET":         p.ClientSecret,
		"TASKCENTER_AUTH_OIDC_SCOPES":                "openid,profile,email,groups",
		"TASKCENTER_AUTH_OIDC_USER_CLAIM":            "preferred_username",
		"TASKCENTER_AUTH_OIDC_NAME":                  "corp",
		"TASKCENTER_AUTH_OIDC_ADMIN_VALUES":          "taskcenter-admins",
		"TASKCENTER_AUTH_OIDC_JWKS_REFRESH_INTERVAL": "1s",
		"TASKCENTER_CLEANUP_SPEC":                    "@every 1h",
	}
}

// jwt is an access token for user from the provider's key, changed by change.
func (p companyIdP) jwt(t *testing.T, kp *mockoidc.Keypair, user string, change ...func(jwt.MapClaims)) string {
	t.Helper()
	c := p.Claims(user, func(c jwt.MapClaims) { c["sub"], c["aud"] = "id-"+user, []string{testenv.Audience} })
	for _, f := range change {
		f(c)
	}
	return testenv.Sign(t, kp, c)
}

type auditJSON struct {
	Items []struct {
		Actor, Via, Action, Target, Outcome, Detail string
		ClientAddr                                  string `json:"client_addr"`
		At                                          time.Time
		Count                                       int
	}
}

// auditTrail reads the audit rows a query selects (such as "actor=oidc:corp:alice"), newest
// first, each as "via action outcome".
func (p *proc) auditTrail(token, query string) []string {
	p.t.Helper()
	var trail auditJSON
	p.getJSON("/api/v1/audit?"+query, token, &trail)
	var got []string
	for _, r := range trail.Items {
		got = append(got, r.Via+" "+r.Action+" "+r.Outcome)
	}
	return got
}

func TestBearerJWTsFromTheCompanyIdP(t *testing.T) {
	idp := newCompanyIdP(t)
	_, api := startEnv(t, idp.vars(), "api")
	kp := idp.Key()
	alice := idp.jwt(t, kp, "alice")

	// A JWT is accepted as its user, qualified by the provider: what it submits is
	// oidc:corp:alice's, not the config user alice's.
	res := api.do("POST", "/api/v1/exports", alice, map[string]any{"type": "customers"})
	if res.status != http.StatusAccepted {
		t.Fatalf("submit with a JWT: %d %s", res.status, res.body)
	}
	var sub struct{ Task taskJSON }
	res.json(t, &sub)
	if sub.Task.Owner != "oidc:corp:alice" {
		t.Fatalf("owner %q", sub.Task.Owner)
	}
	if res := api.do("GET", "/api/v1/tasks/"+sub.Task.ID, aliceToken, nil); res.status != http.StatusNotFound {
		t.Fatalf("the config user alice on the provider's alice's task: %d", res.status)
	}
	if res := api.do("GET", "/api/v1/tasks/"+sub.Task.ID, idp.jwt(t, kp, "bob"), nil); res.status != http.StatusNotFound {
		t.Fatalf("bob's JWT on alice's task: %d", res.status)
	}

	// Every way a JWT can be wrong answers 401 with a problem saying why.
	pub, _ := x509.MarshalPKIXPublicKey(kp.PublicKey)
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": idp.Issuer(), "aud": "taskcenter-api", "preferred_username": "ops",
		"exp": time.Now().Add(time.Minute).Unix(), "groups": []string{"taskcenter-admins"}})
	hs.Header["kid"], _ = kp.KeyID()
	hsToken, _ := hs.SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	stranger, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	stranger.Kid = "not-published"
	header, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"iss": idp.Issuer(), "aud": "taskcenter-api", "preferred_username": "ops", "exp": time.Now().Add(time.Minute).Unix()})
	none := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims) + "."
	for _, c := range []struct{ name, token, says string }{
		{"expired", idp.jwt(t, kp, "alice", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), "expired"},
		{"wrong audience", idp.jwt(t, kp, "alice", func(c jwt.MapClaims) { c["aud"] = []string{"payroll"} }), "audience"},
		{"wrong issuer", idp.jwt(t, kp, "alice", func(c jwt.MapClaims) { c["iss"] = "https://login.evil.example" }), "issuer"},
		{"alg none", none, "algorithm"},
		{"HS256 signed with the public key", hsToken, "algorithm"},
		{"unknown kid", idp.jwt(t, stranger, "alice"), "unknown kid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := api.do("POST", "/api/v1/tasks/"+sub.Task.ID+"/cancel", c.token, nil)
			var pr struct{ Code, Detail string }
			res.json(t, &pr)
			if res.status != http.StatusUnauthorized || pr.Code != "unauthorized" || !strings.Contains(pr.Detail, c.says) ||
				res.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s %q", res.status, pr.Code, pr.Detail)
			}
		})
	}

	// The provider rotates its key: tokens of the new key work, the old key's stop.
	fresh := idp.Rotate(t)
	time.Sleep(1100 * time.Millisecond) // past auth.oidc.jwks_refresh_interval since the last fetch
	if res := api.do("GET", "/api/v1/tasks", idp.jwt(t, fresh, "alice"), nil); res.status != http.StatusOK {
		t.Fatalf("a token of the rotated key: %d %s", res.status, res.body)
	}
	time.Sleep(1100 * time.Millisecond)
	if res := api.do("GET", "/api/v1/tasks", alice, nil); res.status != http.StatusUnauthorized {
		t.Fatalf("a token of the removed key: %d", res.status)
	}

	// The admin group makes an admin; an admin answers who did what from the API alone.
	ops := idp.jwt(t, fresh, "ops", func(c jwt.MapClaims) { c["groups"] = []string{"staff", "taskcenter-admins"} })
	aliceNow := idp.jwt(t, fresh, "alice")
	if res := api.do("POST", "/api/v1/tasks/"+sub.Task.ID+"/cancel", aliceNow, nil); res.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", res.status, res.body)
	}
	var trail auditJSON
	api.getJSON("/api/v1/audit?target="+sub.Task.ID, ops, &trail) // as the IdP's admin
	var got []string
	for _, r := range trail.Items {
		got = append(got, r.Actor+" "+r.Via+" "+r.Action+" "+r.Outcome)
	}
	want := []string{"oidc:corp:alice jwt task.cancel success", "oidc:corp:alice jwt task.submit success"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the trail of %s:\n got %q\nwant %q", sub.Task.ID, got, want)
	}
	// The refused JWTs (six wrong ones, one of the removed key) are counted per address and
	// minute, not a row each.
	res = api.do("GET", "/api/v1/audit?action=auth.bad_credential", ops, nil)
	var refused auditJSON
	res.json(t, &refused)
	attempts := 0
	for _, r := range refused.Items {
		if r.Actor != "" || r.Via != "bearer" || r.Outcome != "denied" || r.ClientAddr != "127.0.0.1" {
			t.Fatalf("a refused JWT's row %+v", r)
		}
		attempts += r.Count
	}
	if attempts != 7 || len(refused.Items) > 2 { // two only when a minute turned meanwhile
		t.Fatalf("refused JWTs: %d attempts on %d rows, want 7 on one row a minute", attempts, len(refused.Items))
	}
	if c := trail.Items[0]; c.ClientAddr != "127.0.0.1" || c.At.IsZero() {
		t.Fatalf("who cancelled, when, from where: %+v", c)
	}
	if res := api.do("GET", "/api/v1/audit", aliceNow, nil); res.status != http.StatusForbidden {
		t.Fatalf("a user's JWT on the audit: %d", res.status)
	}

	// A script gets a read-only API token from a JWT user; it reads, and cannot submit.
	res = api.do("POST", "/api/v1/tokens", aliceNow, map[string]any{"name": "dashboard", "scopes": []string{"tasks:read"}})
	var tok struct{ Token string }
	res.json(t, &tok)
	if res.status != http.StatusCreated || tok.Token == "" {
		t.Fatalf("create token: %d %s", res.status, res.body)
	}
	if res := api.do("GET", "/api/v1/tasks/"+sub.Task.ID, tok.Token, nil); res.status != http.StatusOK {
		t.Fatalf("read with the API token: %d", res.status)
	}
	res = api.do("POST", "/api/v1/exports", tok.Token, map[string]any{"type": "customers"})
	if res.status != http.StatusForbidden || !strings.Contains(string(res.body), "tasks:write") {
		t.Fatalf("submit with a read-only token: %d %s", res.status, res.body)
	}
	// The config's demo tokens still work beside the provider.
	if res := api.do("GET", "/api/v1/tasks", aliceToken, nil); res.status != http.StatusOK {
		t.Fatalf("a config token: %d", res.status)
	}
}

// The provider is on another site than the service (127.0.0.2 and 127.0.0.1 are two sites
// to a browser), keeps a session of its own as a company's provider does, and offers
// RP-initiated sign-out. In Chromium: sign in there, use the page, sign out (which ends the
// provider's session too), and sign in again, which asks for the credentials again.
func TestSignInWithTheCompanyIdPInChromium(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	idp := companyIdP{testenv.NewIdPAt(t, "127.0.0.2")}
	const password = "alice-at-the-company"
	idp.RequireSignIn(password, &mockoidc.MockUser{Subject: "id-alice", PreferredUsername: "alice", Email: "alice@example.com", Groups: []string{"staff"}})
	_, api := startEnv(t, idp.vars(), "api") // no worker: the export waits, so it can be cancelled at once
	base := api.base
	if strings.Contains(base, "127.0.0.2") || !strings.Contains(idp.Issuer(), "127.0.0.2") {
		t.Fatalf("the service (%s) and the provider (%s) must be two sites", base, idp.Issuer())
	}

	res := api.do("POST", "/api/v1/exports", idp.jwt(t, idp.Key(), "alice"), map[string]any{"type": "customers"})
	var sub struct{ Task taskJSON }
	res.json(t, &sub)

	signIn := func(n int) {
		t.Helper()
		b.click("sign in with the company account", "#sso")
		b.wait("the provider asks for the credentials", `location.host === "`+strings.TrimPrefix(idp.Addr(), "http://")+`" && !!document.querySelector("#idp-username")`, 10*time.Second)
		if got := idp.CredentialsAsked.Load(); got != int64(n) {
			t.Fatalf("the provider asked for credentials %d times, want %d", got, n)
		}
		b.run("alice's credentials", chromedp.SendKeys(chromedp.CSS("#idp-username"), "alice"),
			chromedp.SendKeys(chromedp.CSS("#idp-password"), password), chromedp.Click(chromedp.CSS("#idp-submit")))
	}
	b.run("open the page", chromedp.Navigate(base+"/tasks/"+sub.Task.ID), chromedp.WaitVisible(chromedp.CSS("#sso")))
	signIn(1)
	b.wait("back on the task, signed in as the provider's alice", `location.origin === "`+base+`" && location.pathname === "/tasks/`+sub.Task.ID+`" && document.querySelector(".who") &&
		document.querySelector(".who").innerText === "oidc:corp:alice" && document.querySelector("#task-status").dataset.status === "PENDING"`, 20*time.Second)
	b.click("cancel it", "#cancel")
	b.wait("cancelled by alice", `document.querySelector("#task-status").dataset.status === "CANCELLED" &&
		!document.querySelector("#task-cancelled-by").hidden && document.querySelector("#task-cancelled-by").innerText.startsWith("Cancelled by oidc:corp:alice at ")`, 20*time.Second)
	shot := b.screenshot("sso-cancelled-by")

	// Sign-out ends the page's session and the provider's: the provider was asked to, naming
	// the session's ID token and where to come back to, and sent the browser back here.
	b.click("sign out", "#signout")
	b.wait("the sign-in page", `location.origin === "`+base+`" && location.pathname === "/login" && !!document.querySelector("#sso")`, 10*time.Second)
	ends := idp.EndSessions()
	if len(ends) != 1 || ends[0].Get("id_token_hint") == "" || ends[0].Get("post_logout_redirect_uri") != base+"/login" || ends[0].Get("client_id") != idp.ClientID {
		t.Fatalf("the provider's end-session requests: %v", ends)
	}
	b.run("the page again", chromedp.Navigate(base+"/"))
	b.wait("signed out for good", `location.pathname === "/login"`, 10*time.Second)

	// Signing in again asks for the credentials again: the provider's session is over.
	signIn(2)
	b.wait("signed in again, on the task list", `location.origin === "`+base+`" && location.pathname === "/" && document.querySelector(".who") &&
		document.querySelector(".who").innerText === "oidc:corp:alice"`, 20*time.Second)

	got := api.auditTrail(adminToken, "actor=oidc:corp:alice")
	want := []string{"oidc auth.sign_in success", "oidc auth.sign_out success", "session task.cancel success", "oidc auth.sign_in success", "jwt task.submit success"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("alice's trail:\n got %q\nwant %q", got, want)
	}
	b.checkNoErrorsBut(nil)
	t.Logf("screenshot: %s", shot)
}

// The console (asynqmon, which has no sign-out control of its own) with the provider on
// another site, in Chromium: an admin signs in from the console's sign-in page and lands in
// the console; the task page's nav leads to the console's sign-out, whose button ends the
// console's and the page's sessions and the provider's; the console then asks for a
// sign-in, and the provider for the credentials.
func TestConsoleSignInAndOutWithTheCompanyIdPInChromium(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	idp := companyIdP{testenv.NewIdPAt(t, "127.0.0.2")}
	const password = "ops-at-the-company"
	idp.RequireSignIn(password, &mockoidc.MockUser{Subject: "id-ops", PreferredUsername: "ops", Email: "ops@example.com",
		Groups: []string{"staff", "taskcenter-admins"}})
	api := newEnv(t, idp.vars()).start("api")
	base := api.base
	idpHost := strings.TrimPrefix(idp.Addr(), "http://")

	b.run("the console", chromedp.Navigate(base+"/monitor/"), chromedp.WaitVisible(chromedp.CSS("#sso")))
	b.click("sign in with the company account", "#sso")
	b.wait("the provider asks for the credentials", `location.host === "`+idpHost+`" && !!document.querySelector("#idp-username")`, 10*time.Second)
	b.run("ops's credentials", chromedp.SendKeys(chromedp.CSS("#idp-username"), "ops"),
		chromedp.SendKeys(chromedp.CSS("#idp-password"), password), chromedp.Click(chromedp.CSS("#idp-submit")))
	b.wait("in the console", `location.origin === "`+base+`" && location.pathname === "/monitor/" && document.readyState === "complete" &&
		!!document.querySelector("#root") && document.querySelector("#root").innerText.includes("Queues")`, 20*time.Second)

	b.run("the task page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#console-signout")))
	b.click("sign out of the console", "#console-signout")
	b.wait("the console's sign-out page", `location.pathname === "/monitor/logout" && !!document.querySelector("#console-signout-submit")`, 10*time.Second)
	b.click("sign out", "#console-signout-submit")
	b.wait("back on this site's sign-in page", `location.origin === "`+base+`" && location.pathname === "/login" && !!document.querySelector("#sso")`, 10*time.Second)
	ends := idp.EndSessions()
	if len(ends) != 1 || ends[0].Get("id_token_hint") == "" || ends[0].Get("post_logout_redirect_uri") != base+"/login" {
		t.Fatalf("the provider's end-session requests: %v", ends)
	}
	b.run("the console again", chromedp.Navigate(base+"/monitor/"))
	b.wait("the console asks for a sign-in", `location.pathname === "/monitor/login" && !!document.querySelector("#sso")`, 10*time.Second)
	b.click("sign in with the company account", "#sso")
	b.wait("the provider asks for the credentials again", `location.host === "`+idpHost+`" && !!document.querySelector("#idp-username")`, 10*time.Second)
	if got := idp.CredentialsAsked.Load(); got != 2 {
		t.Fatalf("the provider asked for credentials %d times, want 2", got)
	}

	got := api.auditTrail(adminToken, "actor=oidc:corp:ops")
	if want := []string{"oidc auth.sign_out success", "oidc auth.sign_in success"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("ops's trail:\n got %q\nwant %q", got, want)
	}
}
