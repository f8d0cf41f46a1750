package monitor

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// The console's page asks for nothing outside this origin, no manifest the browser would
// fetch without credentials, and its policy names exactly the page's inline scripts; the
// sign-in page and the refusals carry the same protections.
func TestConsolePageStaysOnThisMachine(t *testing.T) {
	t.Parallel()
	c := newConsoleEnv(t).console(ConsoleConfig{ReadOnly: true})
	for _, path := range []string{ConsolePath + "/", ConsolePath + "/queues/imports", ConsolePath + "/servers"} {
		rec := send(c, "GET", path, here, bearer(consoleAdmin), nil)
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, `<div id="root">`) {
			t.Fatalf("%s: %d %.200s", path, rec.Code, body)
		}
		if m := regexp.MustCompile(`(?:href|src)="(https?:)?//[^"]*"`).FindString(body); m != "" {
			t.Errorf("%s asks for %s", path, m)
		}
		if strings.Contains(body, "manifest.json") || strings.Contains(body, "fonts.googleapis") {
			t.Errorf("%s still links the manifest or the fonts", path)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		hashes := scriptHashes([]byte(body))
		if len(hashes) != 2 {
			t.Fatalf("%s: %d inline scripts, want asynqmon's 2", path, len(hashes))
		}
		for _, h := range hashes {
			if !strings.Contains(csp, "'"+h+"'") {
				t.Errorf("%s: policy %q does not name the inline script %s", path, csp, h)
			}
		}
		if !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-eval") || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, rec.Header())
		}
		if got := rec.Header().Get("Content-Length"); got == "" {
			t.Errorf("%s: no Content-Length", path)
		}
	}
	// The bundle passes through as asynqmon serves it.
	rec := send(c, "GET", ConsolePath+"/static/js/runtime-main.9fea6c1a.js", here, bearer(consoleAdmin), nil)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/javascript") {
		t.Fatalf("the bundle: %d %v", rec.Code, rec.Header())
	}
	for _, path := range []string{ConsolePath + "/login", ConsolePath + "/api/queues"} {
		rec := send(c, "GET", path, here, nil, nil)
		if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s (%d): headers %v", path, rec.Code, rec.Header())
		}
	}
}

// From a task to its job: the console redirects to the job's page while Redis holds it, to
// the queue's page once it does not, and answers 404 for a task that does not exist; a job
// id works as well as a task id. Only admins get there.
func TestConsoleFindsATasksJob(t *testing.T) {
	t.Parallel()
	e := newConsoleEnv(t)
	st := store.New(storetest.NewPostgres(t).DB)
	inspector := asynq.NewInspectorFromRedisClient(e.rd.Client)
	enq := jobs.NewEnqueuer(asynq.NewClientFromRedisClient(e.rd.Client), inspector, nil)
	c := e.console(ConsoleConfig{ReadOnly: true, Tasks: st})
	ctx := context.Background()
	task, _, err := st.Create(ctx, store.NewTask{TaskNo: jobs.NewTaskNo(), Type: "export:customers", Owner: "alice", Queue: "exports", MaxRetry: 3, TimeoutSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if err := enq.Enqueue(ctx, task); err != nil {
		t.Fatal(err)
	}
	job := jobs.JobID(task.TaskNo, task.Attempt)
	want := ConsolePath + "/queues/" + jobs.Lane(task) + "/tasks/" + job
	for _, id := range []string{task.TaskNo, job} {
		rec := send(c, "GET", JobsPath+id, here, bearer(consoleAdmin), nil)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != want {
			t.Fatalf("%s: %d %q, want a redirect to %s", id, rec.Code, rec.Header().Get("Location"), want)
		}
	}
	if err := inspector.DeleteTask(jobs.Lane(task), job); err != nil {
		t.Fatal(err)
	}
	if rec := send(c, "GET", JobsPath+task.TaskNo, here, bearer(consoleAdmin), nil); rec.Header().Get("Location") != ConsolePath+"/queues/exports" {
		t.Fatalf("a job Redis no longer holds: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	if rec := send(c, "GET", JobsPath+"tsk_nothing", here, bearer(consoleAdmin), nil); rec.Code != http.StatusNotFound {
		t.Fatalf("no such task: %d", rec.Code)
	}
	if rec := send(c, "GET", JobsPath+task.TaskNo, here, nil, nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("without credentials: %d", rec.Code)
	}
}
