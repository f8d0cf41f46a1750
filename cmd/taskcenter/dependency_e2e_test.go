package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// In a running process the identity provider's outage is the identity provider's: a JWT
// that cannot be checked answers 503 identity_provider_unavailable, the provider's series
// drops to 0 while Postgres's stays 1, and the log has one line naming the provider and its
// address (scheme, host and port intact), none blaming Postgres.
func TestAnIdentityProviderOutageIsReportedAsItsOwn(t *testing.T) {
	t.Parallel()
	idp := newCompanyIdP(t)
	e := newEnv(t, idp.vars())
	api := e.start("api")
	issuer := idp.Issuer()
	if err := idp.Shutdown(); err != nil {
		t.Fatal(err)
	}

	res := api.do("GET", "/api/v1/tasks", idp.jwt(t, idp.Key(), "alice"), nil)
	var pr struct{ Code, Detail string }
	res.json(t, &pr)
	if res.status != http.StatusServiceUnavailable || pr.Code != "identity_provider_unavailable" || res.header.Get("Retry-After") == "" {
		t.Fatalf("a JWT while the provider is down: %d %+v", res.status, pr)
	}
	if res := api.do("GET", "/api/v1/tasks", aliceToken, nil); res.status != http.StatusOK {
		t.Fatalf("a config token while the provider is down: %d", res.status)
	}
	if up := scrape(t, api, `taskcenter_dependency_up{dependency="identity_provider"}`); up != 0 {
		t.Fatalf("identity_provider up = %v during its outage", up)
	}
	if up := scrape(t, api, `taskcenter_dependency_up{dependency="postgres"}`); up != 1 {
		t.Fatalf("postgres up = %v during the identity provider's outage", up)
	}
	if n := scrape(t, api, `taskcenter_dependency_errors_total{dependency="identity_provider"}`); n < 1 {
		t.Fatalf("identity_provider errors = %v", n)
	}
	line := api.logs.waitFor(t, 10*time.Second, `"msg":"identity_provider is unreachable`, api.done)
	if !strings.Contains(line, issuer) || strings.Contains(line, "http:<path>") {
		t.Fatalf("the outage's line does not show the issuer %s: %s", issuer, line)
	}
	if l := api.logs.matching("is unreachable"); len(l) != 1 {
		t.Fatalf("want one outage line, the provider's:\n%s", strings.Join(l, "\n"))
	}
}
