package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A fake server whose tasks end in the status named by their id.
func fakeServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good-token-0123456789" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"status":401,"code":"unauthorized","detail":"send a valid token"}`)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/events") {
			http.Error(w, `{"status":404,"code":"no_route"}`, http.StatusNotFound)
			return
		}
		status := strings.TrimPrefix(r.URL.Path, "/api/v1/tasks/")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"type":"bench:noop","status":%q,"counts":{"total":3,"success":2,"failed":1}}`, status, status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func runTC(t *testing.T, base, token string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		return map[string]string{"TASKCENTER_URL": base, "TASKCENTER_TOKEN": token}[k]
	}
	code := run(context.Background(), args, env{getenv: getenv, stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

func TestExitCodesFollowTheTaskStatus(t *testing.T) {
	t.Parallel()
	base := fakeServer(t)
	for status, want := range map[string]int{"SUCCESS": 0, "PARTIAL_SUCCESS": 2, "FAILED": 1, "TIMEOUT": 1, "CANCELLED": 1} {
		code, out, _ := runTC(t, base, "good-token-0123456789", "watch", status)
		if code != want || !strings.HasPrefix(out, status+" "+status+" bench:noop: 3 rows, 2 ok, 1 rejected") {
			t.Errorf("watch %s: exit %d (want %d), %q", status, code, want, out)
		}
	}
	if code, out, _ := runTC(t, base, "good-token-0123456789", "watch", "SUCCESS", "--json"); code != 0 || !strings.Contains(out, `"status": "SUCCESS"`) {
		t.Errorf("watch --json: %d %q", code, out)
	}
}

func TestUsageAndAuthExitThree(t *testing.T) {
	t.Parallel()
	base := fakeServer(t)
	for _, tc := range []struct {
		token string
		args  []string
		says  string
	}{
		{"wrong-token-0123456789", []string{"show", "SUCCESS"}, "refused the token"},
		{"", []string{"ls"}, "TASKCENTER_TOKEN"},
		{"good-token-0123456789", []string{"show"}, "usage: tc show ID"},
		{"good-token-0123456789", []string{"show", "a", "b"}, "usage: tc show ID"},
		{"good-token-0123456789", []string{"import", "f.xlsx", "--mode", "merge"}, "--mode must be upsert, insert or replace"},
		{"good-token-0123456789", []string{"submit", "bench:noop", "--params", "{nope"}, "not valid JSON"},
		{"good-token-0123456789", []string{"export", "customers", "--filter", "novalue"}, "key=value"},
		{"good-token-0123456789", []string{"--bogus"}, "flag provided but not defined"},
	} {
		code, _, errOut := runTC(t, base, tc.token, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.says) {
			t.Errorf("tc %v: exit %d, %q (want 3, saying %q)", tc.args, code, errOut, tc.says)
		}
	}
}

// Flags may follow the positional arguments, as people type them.
func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	fs := (&cli{}).flags("import")
	wait := fs.Bool("wait", false, "")
	mode := fs.String("mode", "", "")
	pos, err := parse(fs, []string{"customers.xlsx", "--wait", "--mode", "insert"}, 1, "FILE")
	if err != nil || pos[0] != "customers.xlsx" || !*wait || *mode != "insert" {
		t.Fatalf("pos %v wait %v mode %q err %v", pos, *wait, *mode, err)
	}
}

// Asking for help is not a mistake: usage on stdout, exit 0, with or without a token.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"import", "--help"}, {"watch", "-h"}} {
		code, out, errOut := runTC(t, "http://127.0.0.1:1", "", args...)
		if code != exitSuccess || !strings.Contains(out, "usage: tc") || errOut != "" {
			t.Errorf("tc %v: exit %d, stdout %.40q, stderr %q", args, code, out, errOut)
		}
	}
}

// Ctrl-C while following a task exits 130 and says the task runs on, and how to follow or
// stop it; it is not reported as a failed task (1).
func TestInterruptWhileWaitingExits130(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") {
			http.Error(w, `{"status":404,"code":"no_route"}`, http.StatusNotFound)
			return
		}
		cancel() // the user presses Ctrl-C while tc follows the running task
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"tsk_1","type":"bench:noop","status":"RUNNING","counts":{"total":0,"success":0,"failed":0}}`)
	}))
	t.Cleanup(srv.Close)
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		return map[string]string{"TASKCENTER_URL": srv.URL, "TASKCENTER_TOKEN": "good-token-0123456789"}[k]
	}
	code := run(ctx, []string{"watch", "tsk_1"}, env{getenv: getenv, stdout: &out, stderr: &errb})
	if code != exitInterrupted || !strings.Contains(errb.String(), "keeps running") ||
		!strings.Contains(errb.String(), "tc watch tsk_1") || !strings.Contains(errb.String(), "tc cancel tsk_1") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// Several ids go to the bulk action, a hundred to a request; each task's line says what
// happened to it, and the exit code is 1 unless every one was done. One id keeps the single
// action.
func TestCancelAndRetrySeveralSayWhatHappenedToEach(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ IDs []string }
		json.NewDecoder(r.Body).Decode(&req) //nolint:errcheck
		mu.Lock()
		requests = append(requests, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, len(req.IDs)))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/tasks/tsk_ONE/cancel" {
			fmt.Fprint(w, `{"id":"tsk_ONE","type":"bench:noop","status":"CANCELLED"}`)
			return
		}
		var results []string
		for _, id := range req.IDs {
			switch {
			case strings.HasPrefix(id, "tsk_RUN"):
				results = append(results, fmt.Sprintf(`{"id":%q,"outcome":"done","task":{"id":%q,"status":"RUNNING","cancel_requested":true}}`, id, id))
			case strings.HasPrefix(id, "tsk_END"):
				results = append(results, fmt.Sprintf(`{"id":%q,"outcome":"not_allowed","code":"status_conflict","message":"cannot cancel a task that is SUCCESS"}`, id))
			case strings.HasPrefix(id, "tsk_GONE"):
				results = append(results, fmt.Sprintf(`{"id":%q,"outcome":"not_found","code":"task_not_found","message":"no task with this id is visible to you"}`, id))
			default:
				status := map[string]string{"/api/v1/tasks/cancel": "CANCELLED", "/api/v1/tasks/retry": "PENDING"}[r.URL.Path]
				results = append(results, fmt.Sprintf(`{"id":%q,"outcome":"done","task":{"id":%q,"status":%q}}`, id, id, status))
			}
		}
		fmt.Fprintf(w, `{"results":[%s]}`, strings.Join(results, ","))
	}))
	t.Cleanup(srv.Close)
	const token = "good-token-0123456789"

	code, out, _ := runTC(t, srv.URL, token, "cancel", "tsk_A", "tsk_RUN1", "tsk_END1", "tsk_GONE1")
	want := "tsk_A CANCELLED\ntsk_RUN1 RUNNING, cancel requested: it stops at its next batch\n" +
		"tsk_END1 not cancelled: cannot cancel a task that is SUCCESS\ntsk_GONE1 not found\n"
	if code != exitFailed || out != want {
		t.Errorf("cancel several: exit %d\n%s", code, out)
	}
	code, out, _ = runTC(t, srv.URL, token, "retry", "tsk_A", "tsk_B")
	if code != exitSuccess || out != "tsk_A PENDING\ntsk_B PENDING\n" {
		t.Errorf("retry several: exit %d\n%s", code, out)
	}
	code, out, _ = runTC(t, srv.URL, token, "cancel", "tsk_A", "tsk_END1", "--json")
	var results []map[string]any
	if err := json.Unmarshal([]byte(out), &results); err != nil || code != exitFailed || len(results) != 2 || results[1]["outcome"] != "not_allowed" {
		t.Errorf("cancel several --json: exit %d %v\n%s", code, err, out)
	}
	if code, out, _ = runTC(t, srv.URL, token, "cancel", "tsk_ONE"); code != exitSuccess || out != "tsk_ONE CANCELLED\n" {
		t.Errorf("cancel one: exit %d %q", code, out)
	}
	ids := make([]string, 250)
	for i := range ids {
		ids[i] = fmt.Sprintf("tsk_%03d", i)
	}
	mu.Lock()
	requests = nil
	mu.Unlock()
	if code, out, _ = runTC(t, srv.URL, token, append([]string{"cancel"}, ids...)...); code != exitSuccess || strings.Count(out, " CANCELLED\n") != 250 {
		t.Errorf("cancel 250: exit %d, %d lines", code, strings.Count(out, "\n"))
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"POST /api/v1/tasks/cancel 100", "POST /api/v1/tasks/cancel 100", "POST /api/v1/tasks/cancel 50"}; !slices.Equal(requests, want) {
		t.Errorf("250 ids went as %q", requests)
	}
	if code, _, errOut := runTC(t, srv.URL, token, "retry"); code != exitUsage || !strings.Contains(errOut, "usage: tc retry ID...") {
		t.Errorf("retry without ids: exit %d %q", code, errOut)
	}
}

// ls sends the search and the sort, and says how many tasks there are beyond those shown.
func TestLsSearchesSortsAndCountsWhatItLeftOut(t *testing.T) {
	t.Parallel()
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"items":[{"id":"tsk_A","type":"import:customers","status":"FAILED","created_at":"2026-12-01T08:00:00Z"},`+
			`{"id":"tsk_B","type":"import:customers","status":"FAILED","created_at":"2026-12-01T08:00:00Z"}],"next_cursor":"x","total":7,`+
			`"counts":{"FAILED":7}}`)
	}))
	t.Cleanup(srv.Close)
	code, out, _ := runTC(t, srv.URL, "good-token-0123456789", "ls", "--search", "budget 2026", "--sort", "-failed", "--limit", "2")
	if code != exitSuccess || !strings.Contains(out, "tsk_B") || !strings.HasSuffix(out, "2 of 7 tasks (--limit 0 for all)\n") {
		t.Errorf("ls: exit %d\n%s", code, out)
	}
	if query != "limit=2&q=budget+2026&sort=-failed" {
		t.Errorf("ls asked %q", query)
	}
}

// import --from re-submits an earlier import as JSON (no upload), with the --column mapping;
// --column also goes with an upload, as the columns form field.
func TestImportFromAnEarlierTaskWithAColumnMapping(t *testing.T) {
	t.Parallel()
	type seen struct {
		contentType string
		body        map[string]any
		columns     string
	}
	got := make(chan seen, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s seen
		s.contentType = r.Header.Get("Content-Type")
		if strings.HasPrefix(s.contentType, "multipart/") {
			s.columns = r.FormValue("columns")
		} else {
			json.NewDecoder(r.Body).Decode(&s.body) //nolint:errcheck
		}
		got <- s
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"task":{"id":"tsk_NEW","type":"import:customers","status":"PENDING"}}`)
	}))
	t.Cleanup(srv.Close)
	const token = "good-token-0123456789"

	code, out, errOut := runTC(t, srv.URL, token, "import", "--from", "tsk_OLD", "--column", "联系电话=phone", "--column", "姓名=name", "--dry-run=false")
	s := <-got
	cols, _ := s.body["columns"].(map[string]any)
	if code != exitSuccess || !strings.Contains(out, "tsk_NEW") || s.contentType != "application/json" || s.body["from_task"] != "tsk_OLD" ||
		cols["联系电话"] != "phone" || cols["姓名"] != "name" || s.body["dry_run"] != false {
		t.Fatalf("import --from: exit %d %q %q; sent %+v", code, out, errOut, s)
	}

	file := t.TempDir() + "/members.csv"
	if err := os.WriteFile(file, []byte("会员号,姓名,联系电话\nM1,a,13800138000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runTC(t, srv.URL, token, "import", file, "--column", "会员号=code")
	if s := <-got; code != exitSuccess || s.columns != `{"会员号":"code"}` {
		t.Fatalf("import FILE --column: exit %d %q; columns field %q", code, errOut, s.columns)
	}

	if code, _, errOut := runTC(t, srv.URL, token, "import", "--from", "tsk_OLD", "--column", "nofield"); code != exitUsage || !strings.Contains(errOut, "HEADER=FIELD") {
		t.Fatalf("a bad --column: exit %d %q", code, errOut)
	}
}

// An import that failed on headers it does not know says how to map them.
func TestAFailedHeaderSaysHowToMapTheColumns(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"tsk_F","type":"import:customers","status":"FAILED","error":{"code":"missing_columns",`+
			`"message":"row 1: the header row is missing required column(s)","details":{"header_row":1,"headers":["会员号","联系 电话"],`+
			`"unknown_headers":["会员号","联系 电话"],"missing_fields":["code","phone"],"fields":[]}}}`)
	}))
	t.Cleanup(srv.Close)
	code, out, _ := runTC(t, srv.URL, "good-token-0123456789", "show", "tsk_F")
	if code != exitSuccess || !strings.Contains(out, "map the columns: tc import --from tsk_F --column 会员号=code --column '联系 电话=phone'") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
