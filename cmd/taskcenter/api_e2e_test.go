package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOneUserCannotReachAnothersTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.seedCustomers(3)
	p := e.start("all")
	task := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	p.waitStatus(aliceToken, task.ID, 30*time.Second, "SUCCESS")

	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/tasks/" + task.ID},
		{"POST", "/api/v1/tasks/" + task.ID + "/cancel"},
		{"POST", "/api/v1/tasks/" + task.ID + "/retry"},
		{"GET", "/api/v1/tasks/" + task.ID + "/result"},
	} {
		res := p.do(c.method, c.path, bobToken, nil)
		if res.status != http.StatusNotFound || res.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("bob %s %s: %d %s, want a 404 problem", c.method, c.path, res.status, res.body)
		}
	}
	var list ListViewJSON
	p.do("GET", "/api/v1/tasks", bobToken, nil).json(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("bob lists %d tasks, want none", len(list.Items))
	}
	if res := p.do("GET", "/api/v1/tasks?owner=alice", bobToken, nil); res.status != http.StatusBadRequest {
		t.Fatalf("bob asks for alice's list: %d", res.status)
	}
	// The admin sees and downloads everything.
	if res := p.do("GET", "/api/v1/tasks/"+task.ID+"/result", adminToken, nil); res.status != http.StatusOK {
		t.Fatalf("admin download: %d", res.status)
	}
	p.do("GET", "/api/v1/tasks?owner=alice", adminToken, nil).json(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != task.ID {
		t.Fatalf("admin list of alice = %+v", list.Items)
	}
}

// ListViewJSON is a task list page.
type ListViewJSON struct {
	Items      []taskJSON `json:"items"`
	NextCursor string     `json:"next_cursor"`
}

func TestAuthAndBadRequestsGetActionableProblems(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, nil, "api")
	cases := []struct {
		name, method, path, token string
		body                      any
		status                    int
		code, detail              string
	}{
		{"no token", "GET", "/api/v1/tasks", "", nil, 401, "unauthorized", "Authorization: Bearer"},
		{"wrong token", "GET", "/api/v1/tasks", "not-a-token-at-all", nil, 401, "unauthorized", ""},
		{"unknown export", "POST", "/api/v1/exports", aliceToken, map[string]any{"type": "invoices"}, 422, "unknown_type", "use customers or tasks"},
		{"unknown filter field", "POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"town": "x"}}, 400, "invalid_filter", "town"},
		{"bad status filter", "POST", "/api/v1/exports", aliceToken, map[string]any{"type": "tasks", "filter": map[string]any{"status": []string{"DONE"}}}, 422, "bad_filter", `"DONE" is not a task status`},
		{"user exports another's tasks", "POST", "/api/v1/exports", aliceToken, map[string]any{"type": "tasks", "filter": map[string]any{"owner": "bob"}}, 403, "forbidden", "only an admin"},
		{"empty body", "POST", "/api/v1/exports", aliceToken, nil, 400, "invalid_body", "empty"},
		{"bad list status", "GET", "/api/v1/tasks?status=DONE", aliceToken, nil, 400, "invalid_query", ""},
		{"bad list time", "GET", "/api/v1/tasks?created_from=yesterday", aliceToken, nil, 400, "invalid_query", ""},
		{"bad cursor", "GET", "/api/v1/tasks?cursor=bm90LWEtY3Vyc29y", aliceToken, nil, 400, "invalid_query", ""},
		{"unknown task", "GET", "/api/v1/tasks/tsk_nope", aliceToken, nil, 404, "task_not_found", ""},
		{"unknown route", "GET", "/api/v2/things", aliceToken, nil, 404, "no_route", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := p.do(c.method, c.path, c.token, c.body)
			var prob struct {
				Status    int    `json:"status"`
				Code      string `json:"code"`
				Detail    string `json:"detail"`
				RequestID string `json:"request_id"`
			}
			res.json(t, &prob)
			if res.status != c.status || prob.Status != c.status || prob.Code != c.code || !strings.Contains(prob.Detail, c.detail) ||
				prob.RequestID == "" || res.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s, want %d %s containing %q", res.status, res.body, c.status, c.code, c.detail)
			}
		})
	}
}

func TestBacklogOverLimitAnswers429AndLeavesNoTask(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, map[string]string{"TASKCENTER_QUEUES_EXPORTS_BACKLOG_LIMIT": "3"}, "api") // no workers: the backlog only grows
	for range 3 {
		p.submitExport(aliceToken, map[string]any{"type": "customers"})
	}
	// The admission count is cached for a second; wait until it has seen all three.
	time.Sleep(1100 * time.Millisecond)
	res := p.do("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers"})
	if res.status != http.StatusTooManyRequests || res.header.Get("Retry-After") == "" {
		t.Fatalf("submit over the limit: %d %v %s", res.status, res.header, res.body)
	}
	if n := e.count("SELECT count(*) FROM tasks"); n != 3 {
		t.Fatalf("tasks = %d after a refused submit, want 3", n)
	}
}

func TestIdempotencyKeyReturnsTheFirstTask(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, nil, "api")
	body := map[string]any{"type": "customers", "filter": map[string]any{"city": "Shanghai"}}
	first := p.submitExport(aliceToken, body, "Idempotency-Key", "report-2026-11")

	var wg sync.WaitGroup
	ids := make(chan string, 10)
	for range 10 {
		wg.Go(func() {
			res := p.do("POST", "/api/v1/exports", aliceToken, body, "Idempotency-Key", "report-2026-11")
			var out struct {
				Task      taskJSON
				Duplicate bool
			}
			res.json(t, &out)
			if res.status != http.StatusOK || !out.Duplicate {
				t.Errorf("replay: %d %s", res.status, res.body)
			}
			ids <- out.Task.ID
		})
	}
	wg.Wait()
	close(ids)
	for id := range ids {
		if id != first.ID {
			t.Fatalf("replay returned %s, want %s", id, first.ID)
		}
	}
	other := map[string]any{"type": "customers", "filter": map[string]any{"city": "Beijing"}}
	if res := p.do("POST", "/api/v1/exports", aliceToken, other, "Idempotency-Key", "report-2026-11"); res.status != http.StatusUnprocessableEntity {
		t.Fatalf("key reused with other parameters: %d %s", res.status, res.body)
	}
	// The key is per user: bob's identical request is his own task.
	bobs := p.submitExport(bobToken, body, "Idempotency-Key", "report-2026-11")
	if bobs.ID == first.ID {
		t.Fatal("bob got alice's task")
	}
	if n := e.count("SELECT count(*) FROM tasks"); n != 2 {
		t.Fatalf("tasks = %d, want 2", n)
	}
}

func TestTaskExportIsScopedToTheSubmitter(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, nil, "all")
	a1 := p.submitExport(aliceToken, map[string]any{"type": "customers"})
	b1 := p.submitExport(bobToken, map[string]any{"type": "customers"})
	p.waitStatus(aliceToken, a1.ID, 30*time.Second, "SUCCESS")
	p.waitStatus(bobToken, b1.ID, 30*time.Second, "SUCCESS")

	mine := p.submitExport(aliceToken, map[string]any{"type": "tasks"})
	all := p.submitExport(adminToken, map[string]any{"type": "tasks", "filter": map[string]any{"type": []string{"export:customers"}}})
	for _, c := range []struct {
		token, id string
		want      []string
	}{
		{aliceToken, mine.ID, []string{a1.ID}},
		{adminToken, all.ID, []string{a1.ID, b1.ID}},
	} {
		done := p.waitStatus(c.token, c.id, 30*time.Second, "SUCCESS", "FAILED")
		rows := readSheet(t, p.do("GET", done.Links["result"], c.token, nil).body)
		var got []string
		for _, r := range rows[1:] {
			if r[1] == "export:customers" {
				got = append(got, r[0])
			}
		}
		if len(got) != len(c.want) || strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("export %s lists customer exports %v, want %v", c.id, got, c.want)
		}
		if c.token == aliceToken {
			for _, r := range rows[1:] {
				if r[2] != "alice" {
					t.Errorf("alice's task export contains %s's task %s", r[2], r[0])
				}
			}
		}
	}
}

func TestListFiltersAndPaginates(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, nil, "api")
	var ids []string
	for range 7 {
		ids = append(ids, p.submitExport(aliceToken, map[string]any{"type": "customers"}).ID)
	}
	cancelled := ids[2]
	p.do("POST", "/api/v1/tasks/"+cancelled+"/cancel", aliceToken, nil)

	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		var page ListViewJSON
		p.do("GET", "/api/v1/tasks?limit=3&cursor="+cursor, aliceToken, nil).json(t, &page)
		for _, it := range page.Items {
			seen = append(seen, it.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if len(seen) != 7 || seen[0] != ids[6] || seen[6] != ids[0] {
		t.Fatalf("paged listing = %v, want all 7 newest first", seen)
	}
	var filtered ListViewJSON
	p.do("GET", "/api/v1/tasks?status=cancelled&type=export:customers", aliceToken, nil).json(t, &filtered)
	if len(filtered.Items) != 1 || filtered.Items[0].ID != cancelled {
		t.Fatalf("status filter = %+v", filtered.Items)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	p.do("GET", "/api/v1/tasks?created_from="+future, aliceToken, nil).json(t, &filtered)
	if len(filtered.Items) != 0 {
		t.Fatalf("created_from in the future lists %d tasks", len(filtered.Items))
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	_, p := startEnv(t, nil, "api")
	if res := p.do("GET", "/healthz", "", nil); res.status != 200 {
		t.Fatalf("healthz %d", res.status)
	}
	res := p.do("GET", "/readyz", "", nil)
	if res.status != 200 || !strings.Contains(string(res.body), `"postgres":"ok"`) || !strings.Contains(string(res.body), `"redis":"ok"`) {
		t.Fatalf("readyz %d %s", res.status, res.body)
	}
}
