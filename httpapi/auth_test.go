package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/taskcenter/taskcenter/httpapi/identity"
	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/store/audit"
)

// createToken makes an API token through the API and returns it.
func (e *apiEnv) createToken(as string, body map[string]any) identity.TokenView {
	e.t.Helper()
	rec := e.callJSON("POST", "/api/v1/tokens", as, body)
	if rec.Code != http.StatusCreated {
		e.t.Fatalf("create token: %d %s", rec.Code, rec.Body)
	}
	var v identity.TokenView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || !strings.HasPrefix(v.Token, auth.APITokenPrefix) {
		e.t.Fatalf("created token %s: %v", rec.Body, err)
	}
	return v
}

// auditRows lists the audit trail as the admin sees it.
func (e *apiEnv) auditRows(query string) []identity.AuditView {
	e.t.Helper()
	rec := e.call("GET", "/api/v1/audit?limit=200&"+query, adminToken, nil)
	if rec.Code != http.StatusOK {
		e.t.Fatalf("audit: %d %s", rec.Code, rec.Body)
	}
	var out struct{ Items []identity.AuditView }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		e.t.Fatal(err)
	}
	return out.Items
}

// openAPIOperations lists every METHOD /path the API description documents under /api/.
func openAPIOperations(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, ops := range doc.Paths {
		if !strings.HasPrefix(path, "/api/") {
			continue
		}
		for method := range ops {
			// A HEAD is its GET, answered by the same route.
			if method != "parameters" && method != "head" {
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	if len(out) < 25 {
		t.Fatalf("only %d operations in openapi.yaml", len(out))
	}
	return out
}

// Every route the API describes is refused to a token without the scope it needs, with a 403
// naming that scope, and served to one with it; each refusal leaves one audit row, reads
// included.
func TestScopeEnforcementOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	readOnly := e.createToken(aliceToken, map[string]any{"name": "dashboards", "scopes": []string{"tasks:read"}}).Token
	writeOnly := e.createToken(aliceToken, map[string]any{"name": "submitter", "scopes": []string{"tasks:write"}}).Token
	adminRead := e.createToken(adminToken, map[string]any{"name": "auditor", "scopes": []string{"tasks:read", "admin"}}).Token
	task := e.finishedExport(nil)
	fill := strings.NewReplacer("{id}", task.TaskNo, "{delivery}", "dlv_none")
	for _, op := range openAPIOperations(t) {
		method, path, _ := strings.Cut(op, " ")
		target := fill.Replace(path)
		need := routeScope(op)
		t.Run(op, func(t *testing.T) {
			var lacking, holding string
			switch need {
			case auth.ScopeRead:
				lacking, holding = writeOnly, readOnly
			case auth.ScopeWrite:
				lacking, holding = readOnly, writeOnly
			case auth.ScopeAdmin:
				lacking, holding = readOnly, adminRead
			}
			before := len(e.auditRows("actor=alice&outcome=denied"))
			rec := e.call(method, target, lacking, strings.NewReader("{}"))
			pr := problemOf(t, rec)
			if rec.Code != http.StatusForbidden || !(strings.Contains(pr.Detail, need) || (need == auth.ScopeAdmin && pr.Code == "forbidden")) {
				t.Fatalf("without %s: %d %s %q", need, rec.Code, pr.Code, pr.Detail)
			}
			if need == auth.ScopeWrite && !strings.Contains(rec.Header().Get("WWW-Authenticate"), `scope="tasks:write"`) {
				t.Fatalf("WWW-Authenticate %q", rec.Header().Get("WWW-Authenticate"))
			}
			if denied := len(e.auditRows("actor=alice&outcome=denied")) - before; denied != 1 {
				t.Fatalf("the refusal left %d audit rows, want 1", denied)
			}
			if method == http.MethodGet && strings.HasSuffix(path, "events") {
				return // a stream: it is enough that the scope check let it through (below, for a plain GET)
			}
			rec = e.call(method, target, holding, strings.NewReader("{}"))
			if rec.Code == http.StatusForbidden && problemOf(t, rec).Code == "insufficient_scope" {
				t.Fatalf("with %s: still refused: %s", need, rec.Body)
			}
		})
	}
}

func TestAPITokensAreShownOnceScopedAndRevocable(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	in30days := time.Now().Add(30 * 24 * time.Hour).Truncate(time.Second).UTC()
	tok := e.createToken(aliceToken, map[string]any{"name": "nightly", "scopes": []string{"tasks:read"}, "expires_at": in30days.Format(time.RFC3339)})
	if tok.Owner != "alice" || !tok.ExpiresAt.Equal(in30days) || tok.Prefix != tok.Token[:9] {
		t.Fatalf("token %+v", tok)
	}
	// Listed without the token; only its hash is in the database.
	rec := e.call("GET", "/api/v1/tokens", aliceToken, nil)
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), tok.Token) || !strings.Contains(rec.Body.String(), tok.ID) {
		t.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	var stored int
	if err := e.pg.DB.QueryRow(`SELECT count(*) FROM api_tokens WHERE hash = ? AND prefix = ?`, auth.HashToken(tok.Token), tok.Prefix).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("stored by hash: %d %v", stored, err)
	}
	// A read-only token reads, and cannot submit or cancel.
	if rec := e.call("GET", "/api/v1/tasks", tok.Token, nil); rec.Code != http.StatusOK {
		t.Fatalf("read with a read token: %d %s", rec.Code, rec.Body)
	}
	rec = e.callJSON("POST", "/api/v1/exports", tok.Token, map[string]any{"type": "customers"})
	if pr := problemOf(t, rec); rec.Code != http.StatusForbidden || pr.Code != "insufficient_scope" || !strings.Contains(pr.Detail, "tasks:write") {
		t.Fatalf("submit with a read token: %d %+v", rec.Code, pr)
	}
	// Nobody grants more than they hold; only admins grant admin or make tokens for others.
	for _, c := range []struct {
		as   string
		body map[string]any
		code string
	}{
		{aliceToken, map[string]any{"name": "x", "scopes": []string{"admin"}}, "forbidden"},
		{aliceToken, map[string]any{"name": "x", "scopes": []string{"tasks:read"}, "owner": "bob"}, "forbidden"},
		{aliceToken, map[string]any{"name": "x", "scopes": []string{"tasks:delete"}}, "invalid_token_request"},
		{aliceToken, map[string]any{"name": "x", "scopes": []string{"tasks:read"}, "expires_at": "2020-01-01T00:00:00Z"}, "invalid_token_request"},
		{aliceToken, map[string]any{"name": "", "scopes": []string{"tasks:read"}}, "invalid_token_request"},
		{tok.Token, map[string]any{"name": "x", "scopes": []string{"tasks:read"}}, "insufficient_scope"},
	} {
		rec := e.callJSON("POST", "/api/v1/tokens", c.as, c.body)
		if pr := problemOf(t, rec); pr.Code != c.code {
			t.Errorf("%v: %d %s, want %s", c.body, rec.Code, pr.Code, c.code)
		}
	}
	bobs := e.createToken(adminToken, map[string]any{"name": "bob's job", "scopes": []string{"tasks:read", "tasks:write"}, "owner": "bob"})
	if bobs.Owner != "bob" || bobs.CreatedBy != "ops" {
		t.Fatalf("admin-made token %+v", bobs)
	}
	// An admin's token without the admin scope sees only the admin's own tasks.
	e.finishedExport(nil)
	opsOwn := e.createToken(adminToken, map[string]any{"name": "own", "scopes": []string{"tasks:read"}})
	var list ListView
	json.Unmarshal(e.call("GET", "/api/v1/tasks", opsOwn.Token, nil).Body.Bytes(), &list) //nolint:errcheck
	if len(list.Items) != 0 {
		t.Fatalf("an admin token without the admin scope saw %d of alice's tasks", len(list.Items))
	}
	// Revoking: bob cannot revoke alice's token; alice can, and it stops at once.
	if rec := e.call("DELETE", "/api/v1/tokens/"+tok.ID, bobToken, nil); rec.Code != http.StatusNotFound {
		t.Fatalf("bob revoking alice's token: %d", rec.Code)
	}
	if rec := e.call("DELETE", "/api/v1/tokens/"+tok.ID, aliceToken, nil); rec.Code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", rec.Code, rec.Body)
	}
	rec = e.call("GET", "/api/v1/tasks", tok.Token, nil)
	if pr := problemOf(t, rec); rec.Code != http.StatusUnauthorized || !strings.Contains(pr.Detail, "revoked") {
		t.Fatalf("a revoked token: %d %+v", rec.Code, pr)
	}
	rows := e.auditRows("target=" + tok.ID)
	if len(rows) != 3 || rows[0].Action != audit.ActionTokenRevoke || rows[0].Actor != "alice" || rows[1].Outcome != audit.Refused ||
		rows[1].Actor != "bob" || rows[2].Action != audit.ActionTokenCreate {
		t.Fatalf("token audit rows %+v", rows)
	}
}

// Each action leaves one audit row — written with the change when there is one — and a
// refused one only its refusal; an admin answers "who cancelled task X, when, from where"
// from the API, and the task view says it too.
func TestAuditTrailRecordsEachActionOnce(t *testing.T) {
	t.Parallel()
	e := newAPI(t, func(d *Deps) { d.Auth.AuditLog = true })
	var sub SubmitView
	rec := e.callJSON("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"}, "X-Request-Id", "req-submit-1")
	if rec.Code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	json.Unmarshal(rec.Body.Bytes(), &sub) //nolint:errcheck
	id := sub.Task.ID
	if rec := e.call("POST", "/api/v1/tasks/"+id+"/cancel", bobToken, nil); rec.Code != http.StatusNotFound {
		t.Fatalf("bob's cancel: %d", rec.Code)
	}
	if rec := e.call("POST", "/api/v1/tasks/"+id+"/cancel", aliceToken, nil, "X-Request-Id", "req-cancel-1"); rec.Code != http.StatusOK {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body)
	}
	if rec := e.call("POST", "/api/v1/tasks/"+id+"/cancel", aliceToken, nil); rec.Code != http.StatusConflict {
		t.Fatalf("second cancel: %d", rec.Code)
	}
	if rec := e.call("GET", "/api/v1/tasks/"+id+"/result", aliceToken, nil); rec.Code != http.StatusConflict {
		t.Fatalf("download before a result: %d", rec.Code)
	}
	if rec := e.call("POST", "/api/v1/tasks/"+id+"/retry", aliceToken, nil); rec.Code != http.StatusAccepted {
		t.Fatalf("retry: %d %s", rec.Code, rec.Body)
	}
	if rec := e.call("POST", "/api/v1/tasks/"+id+"/cancel", "not-a-token-at-all", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d", rec.Code)
	}
	done := e.finishedExport(nil)
	if rec := e.call("GET", "/api/v1/tasks/"+done.TaskNo+"/result", aliceToken, nil); rec.Code != http.StatusOK {
		t.Fatalf("download: %d", rec.Code)
	}
	if rec := e.call("GET", "/api/v1/tasks/"+id, aliceToken, nil); rec.Code != http.StatusOK {
		t.Fatalf("a read: %d", rec.Code)
	}

	rows := e.auditRows("target=" + id)
	var got []string
	for i := len(rows) - 1; i >= 0; i-- {
		got = append(got, rows[i].Actor+" "+rows[i].Action+" "+rows[i].Outcome)
	}
	want := []string{"alice task.submit success", "bob task.cancel refused", "alice task.cancel success", "alice task.cancel refused",
		"alice task.download_result refused", "alice task.retry success"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit rows of %s:\n got %q\nwant %q", id, got, want)
	}
	// The bad token is counted with the other refused credentials of its address and minute.
	if bad := e.auditRows("action=auth.bad_credential"); len(bad) != 1 || bad[0].Count != 1 || bad[0].Actor != "" || bad[0].Via != "bearer" ||
		!strings.HasPrefix(bad[0].Detail, "POST /api/v1/tasks/{id}/cancel: unauthorized") {
		t.Fatalf("the bad token's row %+v", bad)
	}
	if dl := e.auditRows("target=" + done.TaskNo + "&action=task.download_result"); len(dl) != 1 || dl[0].Outcome != "success" || dl[0].Status != 200 {
		t.Fatalf("download rows %+v", dl)
	}
	// Who cancelled it, when, from where.
	who := e.auditRows("target=" + id + "&action=task.cancel&outcome=success")
	if len(who) != 1 || who[0].Actor != "alice" || who[0].ClientAddr != "192.0.2.1" || who[0].RequestID != "req-cancel-1" || who[0].At.IsZero() {
		t.Fatalf("who cancelled: %+v", who)
	}
	// The task view says it (cancelled before the retry).
	var detail DetailView
	rec = e.call("POST", "/api/v1/tasks/"+id+"/cancel", aliceToken, nil)
	json.Unmarshal(e.call("GET", "/api/v1/tasks/"+id, aliceToken, nil).Body.Bytes(), &detail) //nolint:errcheck
	if detail.CancelledBy == nil || detail.CancelledBy.Actor != "alice" {
		t.Fatalf("cancelled_by %+v (%d)", detail.CancelledBy, rec.Code)
	}
	if !strings.Contains(e.logs.String(), `"msg":"audit"`) {
		t.Fatal("audit rows are not in the log")
	}
	if rec := e.call("GET", "/api/v1/audit", aliceToken, nil); rec.Code != http.StatusForbidden {
		t.Fatalf("a user reading the audit: %d", rec.Code)
	}
}

// The gateway's header is believed from the proxies only, and a cross-site change through the
// gateway is refused.
func TestTrustedGatewayHeader(t *testing.T) {
	t.Parallel()
	g, err := auth.NewGateway("X-Forwarded-User", "X-Forwarded-Groups", []string{"admin"}, []string{"192.0.2.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's alice is the config user alice here (see owners_test.go for the rest).
	g.WithSubjects(map[string]string{"alice": "alice"})
	e := newAPI(t, func(d *Deps) { d.Auth.Gateway = g })
	task := e.finishedExport(nil)
	rec := e.call("GET", "/api/v1/tasks/"+task.TaskNo, "", nil, "X-Forwarded-User", "alice") // httptest's peer is 192.0.2.1
	if rec.Code != http.StatusOK {
		t.Fatalf("alice through the gateway: %d %s", rec.Code, rec.Body)
	}
	if rec := e.call("GET", "/api/v1/tasks/"+task.TaskNo, "", nil, "X-Forwarded-User", "bob"); rec.Code != http.StatusNotFound {
		t.Fatalf("bob through the gateway sees alice's task: %d", rec.Code)
	}
	req := func(remote string, headers ...string) int {
		r := httpRequest("GET", "/api/v1/audit", headers...)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, r)
		return w.Code
	}
	if code := req("192.0.2.9:4000", "X-Forwarded-User", "ops", "X-Forwarded-Groups", "staff,admin"); code != http.StatusOK {
		t.Fatalf("an admin through the gateway: %d", code)
	}
	if code := req("198.51.100.7:4000", "X-Forwarded-User", "ops", "X-Forwarded-Groups", "admin"); code != http.StatusUnauthorized {
		t.Fatalf("the header from outside the gateway: %d", code)
	}
	rec = e.call("POST", "/api/v1/tasks/"+task.TaskNo+"/retry", "", nil, "X-Forwarded-User", "alice", "Origin", "https://evil.example.com")
	if pr := problemOf(t, rec); pr.Code != "csrf_failed" {
		t.Fatalf("a cross-site change through the gateway: %d %s", rec.Code, pr.Code)
	}
}

func httpRequest(method, target string, headers ...string) *http.Request {
	r := httptest.NewRequest(method, "http://api.test"+target, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}
