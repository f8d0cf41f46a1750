package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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
		{"good-token-0123456789", []string{"import", "f.xlsx", "--mode", "merge"}, "--mode must be upsert or insert"},
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
