package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/auth"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

// owners is one API with three ways in that can each name "alice": the config token, the
// identity provider (bearer JWTs, named "corp") and the trusted gateway (from 192.0.2.0/24,
// httptest's peer). mapped is the same map_subjects for the provider and the gateway.
type owners struct {
	*apiEnv
	idp *testenv.IdP
}

func newOwners(t *testing.T, mapped map[string]string, change ...func(*Deps)) *owners {
	t.Helper()
	idp := testenv.NewIdP(t)
	gw, err := auth.NewGateway("X-Forwarded-User", "X-Forwarded-Groups", []string{"admin"}, []string{"192.0.2.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	gw.WithSubjects(mapped)
	prov := auth.NewProvider(auth.OIDCConfig{Issuer: idp.Issuer(), Audience: testenv.Audience, Name: "corp", MapSubjects: mapped,
		AdminClaim: "groups", AdminValues: []string{"taskcenter-admins"}})
	e := newAPI(t, append([]func(*Deps){func(d *Deps) { d.Auth.OIDC, d.Auth.Gateway = prov, gw }}, change...)...)
	return &owners{apiEnv: e, idp: idp}
}

// as calls the API as subject through one way in: "token" (subject is a config token or an
// API token), "jwt" or "gateway".
func (o *owners) as(way, subject, method, target string, body any) *httptest.ResponseRecorder {
	o.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			o.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	switch way {
	case "token":
		return o.call(method, target, subject, rd)
	case "jwt":
		return o.call(method, target, testenv.Sign(o.t, o.idp.Key(), o.idp.Claims(subject)), rd)
	case "gateway":
		return o.call(method, target, "", rd, "X-Forwarded-User", subject)
	}
	o.t.Fatalf("no way in %q", way)
	return nil
}

// submit submits an export through a way in and returns the task's id and owner.
func (o *owners) submit(way, subject string) (id, owner string) {
	o.t.Helper()
	rec := o.as(way, subject, "POST", "/api/v1/exports", map[string]any{"type": "customers"})
	if rec.Code != http.StatusAccepted {
		o.t.Fatalf("%s %s submits: %d %s", way, subject, rec.Code, rec.Body)
	}
	v := decodeAs[SubmitView](o.t, rec.Body.Bytes())
	return v.Task.ID, v.Task.Owner
}

// The same name from the config, the identity provider and the gateway is three owners:
// each submits as its own qualified name, sees only its own task, and cannot read or cancel
// the others' (404, as for any other user's); the audit trail and the tokens it makes name it
// by its qualified name too.
func TestTheSameNameFromTwoWaysInIsTwoOwners(t *testing.T) {
	t.Parallel()
	o := newOwners(t, nil)
	ways := []struct{ way, subject, owner string }{
		{"token", aliceToken, "alice"},
		{"jwt", "alice", "oidc:corp:alice"},
		{"gateway", "alice", "gateway:alice"},
	}
	ids := map[string]string{}
	for _, w := range ways {
		id, owner := o.submit(w.way, w.subject)
		if owner != w.owner {
			t.Fatalf("alice through %s owns her task as %q, want %q", w.way, owner, w.owner)
		}
		ids[w.way] = id
	}
	for _, w := range ways {
		for other, id := range ids {
			want := http.StatusNotFound
			if other == w.way {
				want = http.StatusOK
			}
			if rec := o.as(w.way, w.subject, "GET", "/api/v1/tasks/"+id, nil); rec.Code != want {
				t.Errorf("alice through %s reads the task of alice through %s: %d, want %d", w.way, other, rec.Code, want)
			}
			if other != w.way {
				if rec := o.as(w.way, w.subject, "POST", "/api/v1/tasks/"+id+"/cancel", nil); rec.Code != http.StatusNotFound {
					t.Errorf("alice through %s cancels the task of alice through %s: %d, want 404", w.way, other, rec.Code)
				}
			}
		}
		list := decodeAs[struct{ Items []TaskView }](t, o.as(w.way, w.subject, "GET", "/api/v1/tasks", nil).Body.Bytes())
		if len(list.Items) != 1 || list.Items[0].ID != ids[w.way] {
			t.Errorf("alice through %s lists %d tasks, want only her own", w.way, len(list.Items))
		}
		// A user's ?owner= may name only themself: the bare name is someone else's.
		if w.owner != "alice" {
			if rec := o.as(w.way, w.subject, "GET", "/api/v1/tasks?owner=alice", nil); rec.Code != http.StatusBadRequest {
				t.Errorf("alice through %s lists the config user's tasks: %d", w.way, rec.Code)
			}
		}
	}

	// The trail names each by its qualified name: the submit, and the others' refused
	// cancels.
	via := map[string]string{"alice": "token", "oidc:corp:alice": "jwt", "gateway:alice": "gateway"}
	for _, w := range ways {
		rows := o.auditRows("target=" + ids[w.way])
		if len(rows) != 3 {
			t.Errorf("the trail of alice's task through %s: %+v", w.way, rows)
		}
		for _, r := range rows {
			want := "task.cancel refused"
			if r.Actor == w.owner {
				want = "task.submit success"
			}
			if r.Action+" "+r.Outcome != want || r.Via != via[r.Actor] {
				t.Errorf("a row of the trail of alice's task through %s: %+v", w.way, r)
			}
		}
	}

	// An API token made by the provider's alice is hers: it reads her task and no other.
	rec := o.as("jwt", "alice", "POST", "/api/v1/tokens", map[string]any{"name": "script", "scopes": []string{"tasks:read"}})
	tok := decodeAs[struct {
		Token, Owner string
		CreatedBy    string `json:"created_by"`
	}](t, rec.Body.Bytes())
	if rec.Code != http.StatusCreated || tok.Owner != "oidc:corp:alice" || tok.CreatedBy != "oidc:corp:alice" {
		t.Fatalf("a token made by the provider's alice: %d %s", rec.Code, rec.Body)
	}
	if rec := o.as("token", tok.Token, "GET", "/api/v1/tasks/"+ids["jwt"], nil); rec.Code != http.StatusOK {
		t.Errorf("her API token reads her task: %d", rec.Code)
	}
	if rec := o.as("token", tok.Token, "GET", "/api/v1/tasks/"+ids["token"], nil); rec.Code != http.StatusNotFound {
		t.Errorf("her API token reads the config user's task: %d", rec.Code)
	}
	// An admin filters by the qualified name.
	list := decodeAs[struct{ Items []TaskView }](t, o.as("token", adminToken, "GET", "/api/v1/tasks?owner=oidc:corp:alice", nil).Body.Bytes())
	if len(list.Items) != 1 || list.Items[0].ID != ids["jwt"] {
		t.Errorf("the admin's list of oidc:corp:alice: %+v", list.Items)
	}
}

// With map_subjects the operator says the provider's and the gateway's "alice" are the
// config user alice: all three are one owner, and share their tasks. An unmapped subject is
// still qualified.
func TestMappedSubjectsAreTheConfigUser(t *testing.T) {
	t.Parallel()
	o := newOwners(t, map[string]string{"alice": "alice"})
	first, _ := o.submit("token", aliceToken)
	for _, way := range []string{"jwt", "gateway"} {
		id, owner := o.submit(way, "alice")
		if owner != "alice" {
			t.Fatalf("the mapped alice through %s submits as %q", way, owner)
		}
		if rec := o.as(way, "alice", "GET", "/api/v1/tasks/"+first, nil); rec.Code != http.StatusOK {
			t.Fatalf("the mapped alice through %s reads the config user's task: %d", way, rec.Code)
		}
		if rec := o.as("token", aliceToken, "POST", "/api/v1/tasks/"+id+"/cancel", nil); rec.Code != http.StatusOK {
			t.Fatalf("the config user cancels the task of the mapped alice through %s: %d %s", way, rec.Code, rec.Body)
		}
	}
	if rec := o.as("jwt", "alice", "POST", "/api/v1/tasks/"+first+"/cancel", nil); rec.Code != http.StatusOK {
		t.Fatalf("the mapped alice through the provider cancels the config user's task: %d %s", rec.Code, rec.Body)
	}
	if _, owner := o.submit("jwt", "bob"); owner != "oidc:corp:bob" {
		t.Fatalf("an unmapped subject submits as %q", owner)
	}
	if _, owner := o.submit("gateway", "bob"); owner != "gateway:bob" {
		t.Fatalf("an unmapped gateway user submits as %q", owner)
	}
}

// A page session opened for a name a way in gave lasts only while it still gives it: once
// the mapping that made the gateway's alice the config user is removed (a config change,
// another replica), her session ends instead of acting as the config user; the gateway's
// qualified users keep theirs.
func TestSessionsEndWhenTheirWayInNoLongerGivesTheName(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: rd.Addr, DB: rd.DB})
	t.Cleanup(func() { rdb.Close() })
	shared := func(d *Deps) { d.Redis, d.Web.SessionKey = rdb, []byte("a session key shared by the replicas, 32+") }
	before := newOwners(t, map[string]string{"alice": "alice"}, shared)
	after := newOwners(t, nil, shared)

	sessionOf := func(o *owners, user, want string) string {
		t.Helper()
		rec := o.call("GET", "/", "", nil, "X-Forwarded-User", user)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"user":"`+want+`"`) {
			t.Fatalf("the page through the gateway as %s: %d, want signed in as %s", user, rec.Code, want)
		}
		ck := rec.Result().Cookies()
		if len(ck) == 0 {
			t.Fatalf("no session cookie for %s", user)
		}
		return ck[0].Name + "=" + ck[0].Value
	}
	mapped, qualified := sessionOf(before, "alice", "alice"), sessionOf(before, "bob", "gateway:bob")
	if rec := before.call("GET", "/api/v1/tasks", "", nil, "Cookie", mapped); rec.Code != http.StatusOK {
		t.Fatalf("the mapped session where the mapping holds: %d", rec.Code)
	}
	if rec := after.call("GET", "/api/v1/tasks", "", nil, "Cookie", mapped); rec.Code != http.StatusUnauthorized {
		t.Fatalf("the mapped session once the mapping is gone: %d, want 401", rec.Code)
	}
	if rec := after.call("GET", "/api/v1/tasks", "", nil, "Cookie", qualified); rec.Code != http.StatusOK {
		t.Fatalf("a qualified session: %d", rec.Code)
	}
	if got := regexp.MustCompile(`"user":"([^"]*)"`).FindStringSubmatch(after.call("GET", "/", "", nil, "Cookie", qualified).Body.String()); got == nil || got[1] != "gateway:bob" {
		t.Fatalf("the page signed in as %v, want gateway:bob", got)
	}
}
