package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/testenv"
)

// In a running process the identity provider's outage is the identity provider's: a JWT
// that cannot be checked answers 503 identity_provider_unavailable, the provider's series
// drops to 0 while Postgres's stays 1, and the log has one line naming the provider and its
// address (scheme, host and port intact), none blaming Postgres.
func TestAnIdentityProviderOutageIsReportedAsItsOwn(t *testing.T) {
	t.Parallel()
	idp := newCompanyIdP(t)
	_, api := startEnv(t, idp.vars(), "api")
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

// An S3 service that goes away is the object store's outage: an upload answers 503
// object_store_unavailable and leaves no task, the object store's series drops to 0 while
// Postgres's stays 1 (an S3 network error is no database outage), and the log has one line
// naming the object store.
func TestAnObjectStoreOutageIsReportedAsItsOwn(t *testing.T) {
	t.Parallel()
	gw := testenv.NewS3(t)
	e := newEnv(t, map[string]string{
		"TASKCENTER_STORAGE_BACKEND": "s3", "TASKCENTER_STORAGE_ENDPOINT": gw.Endpoint, "TASKCENTER_STORAGE_BUCKET": "taskcenter-deps",
		"TASKCENTER_STORAGE_REGION": gw.Region, "TASKCENTER_STORAGE_ACCESS_KEY": gw.AccessKey,
		"TASKCENTER_STORAGE_SECRET_KEY": gw.SecretKey, "TASKCENTER_STORAGE_CREATE_BUCKET": "true",
	})
	api := e.start("api")
	if up := scrape(t, api, `taskcenter_dependency_up{dependency="object_store"}`); up != 1 {
		t.Fatalf("object_store up = %v with the service running", up)
	}
	gw.Stop()

	content, _ := customersXLSX(t, 10)
	res := api.upload(aliceToken, "customers.xlsx", content, map[string]string{"mode": "upsert"})
	var pr struct{ Code, Detail string }
	json.Unmarshal(res.body, &pr) //nolint:errcheck
	if res.status != http.StatusServiceUnavailable || pr.Code != "object_store_unavailable" || res.header.Get("Retry-After") == "" {
		t.Fatalf("an upload while the S3 service is down: %d %s", res.status, res.body)
	}
	if n := e.count("SELECT count(*) FROM tasks"); n != 0 {
		t.Fatalf("%d tasks left behind by an upload that could not be stored", n)
	}
	if up := scrape(t, api, `taskcenter_dependency_up{dependency="object_store"}`); up != 0 {
		t.Fatalf("object_store up = %v during its outage", up)
	}
	if up := scrape(t, api, `taskcenter_dependency_up{dependency="postgres"}`); up != 1 {
		t.Fatalf("postgres up = %v during the object store's outage", up)
	}
	api.logs.waitFor(t, 10*time.Second, `"msg":"object_store is unreachable`, api.done)
	if l := api.logs.matching("is unreachable"); len(l) != 1 {
		t.Fatalf("want one outage line, the object store's:\n%s", strings.Join(l, "\n"))
	}
}
