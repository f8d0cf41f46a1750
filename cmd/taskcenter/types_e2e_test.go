package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
)

// countdownParams are the parameters of a task type this test adds in this file alone.
type countdownParams struct {
	Steps int `json:"steps" jsonschema:"minimum=1,maximum=1000"`
}

func (p *countdownParams) Prepare(jobs.Who) error {
	if p.Steps < 1 || p.Steps > 1000 {
		return jobs.BadInput("bad_params", "steps must be from 1 to 1000")
	}
	return nil
}

// countdown counts its steps down, reporting progress at each.
type countdown struct{}

func (countdown) Type() string { return "test:countdown" }

func (countdown) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	var p countdownParams
	if err := run.Params(&p); err != nil {
		return jobs.Result{}, err
	}
	for i := 1; i <= p.Steps; i++ {
		time.Sleep(40 * time.Millisecond)
		if err := run.Progress(ctx, int64(i), int64(p.Steps)); err != nil {
			return jobs.Result{}, err
		}
	}
	return jobs.Result{Data: map[string]int{"counted": p.Steps}, Log: msg.Plain(fmt.Sprintf("counted %d", p.Steps))}, nil
}

// A type added in one test file (one declaration, registered with one line) is listed by
// GET /api/v1/types with its params schema, submitted through the generic endpoint, runs
// with progress, can be cancelled and retried, and refuses bad params with a problem.
func TestATypeFromATestFileRunsThroughTheGenericEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.types = []TypeMaker{func(TypeDeps) jobs.Type {
		return jobs.Type{Name: "test:countdown", Description: "Counts down.", Queue: "exports", Submittable: true,
			NewParams: func() jobs.Params { return &countdownParams{} }, Title: "Count {{.Steps}} steps", Handler: countdown{}}
	}}
	p := e.start("all")

	var types struct {
		Items []struct {
			Name         string          `json:"name"`
			Submit       string          `json:"submit"`
			ParamsSchema json.RawMessage `json:"params_schema"`
		} `json:"items"`
	}
	p.do("GET", "/api/v1/types", aliceToken, nil).json(t, &types)
	found := false
	for _, ty := range types.Items {
		if ty.Name == "test:countdown" {
			found = ty.Submit == "POST /api/v1/tasks" && strings.Contains(string(ty.ParamsSchema), `"steps"`)
		}
	}
	if !found {
		t.Fatalf("types = %+v", types.Items)
	}

	if res := p.do("POST", "/api/v1/tasks", aliceToken, map[string]any{"type": "test:countdown", "params": map[string]any{"steps": 0}}); res.status != http.StatusUnprocessableEntity || !strings.Contains(string(res.body), "steps must be") {
		t.Fatalf("bad params: %d %s", res.status, res.body)
	}
	if res := p.do("POST", "/api/v1/tasks", aliceToken, map[string]any{"type": "test:countdown", "params": map[string]any{"steps": 3, "oops": 1}}); res.status != http.StatusUnprocessableEntity {
		t.Fatalf("unknown param: %d %s", res.status, res.body)
	}

	// Cancel a running one, retry it, and let it finish.
	res := p.do("POST", "/api/v1/tasks", aliceToken, map[string]any{"type": "test:countdown", "params": map[string]any{"steps": 100}, "priority": 2})
	if res.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", res.status, res.body)
	}
	var sub struct {
		Task struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"task"`
	}
	res.json(t, &sub)
	if sub.Task.Title != "Count 100 steps" {
		t.Fatalf("title = %q", sub.Task.Title)
	}
	p.waitUnderWay(aliceToken, sub.Task.ID)
	if res := p.do("POST", "/api/v1/tasks/"+sub.Task.ID+"/cancel", aliceToken, nil); res.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", res.status, res.body)
	}
	p.waitStatus(aliceToken, sub.Task.ID, time.Minute, "CANCELLED")
	if res := p.do("POST", "/api/v1/tasks/"+sub.Task.ID+"/retry", aliceToken, nil); res.status != http.StatusAccepted {
		t.Fatalf("retry: %d %s", res.status, res.body)
	}
	final := p.waitStatus(aliceToken, sub.Task.ID, 3*time.Minute, "SUCCESS", "FAILED")
	if final.Status != "SUCCESS" || final.Progress.Percent != 100 || len(final.Attempts) != 2 {
		t.Fatalf("final = %+v", final)
	}
}

// A batch submit creates many tasks in one transaction and answers each submission on its own:
// created, duplicate (a replayed idempotency_key), or the problem that refused it.
func TestBatchSubmitAnswersEachTask(t *testing.T) {
	t.Parallel()
	e, p := startEnv(t, nil, "all")
	var tasks []map[string]any
	for i := range 50 {
		tasks = append(tasks, map[string]any{"type": "export:customers", "params": map[string]any{"filter": map[string]any{}},
			"idempotency_key": fmt.Sprintf("k%d", i%40)})
	}
	tasks = append(tasks, map[string]any{"type": "no:such"}, map[string]any{"type": "export:customers", "priority": 12})
	res := p.do("POST", "/api/v1/tasks:batch", aliceToken, map[string]any{"tasks": tasks})
	if res.status != http.StatusOK {
		t.Fatalf("batch: %d %s", res.status, res.body)
	}
	var out struct {
		Items []struct {
			Index   int                    `json:"index"`
			Result  string                 `json:"result"`
			Task    *struct{ ID string }   `json:"task"`
			Problem *struct{ Code string } `json:"problem"`
		} `json:"items"`
	}
	res.json(t, &out)
	count := map[string]int{}
	for i, it := range out.Items {
		if it.Index != i {
			t.Fatalf("item %d answered as %d", i, it.Index)
		}
		count[it.Result]++
	}
	if count["created"] != 40 || count["duplicate"] != 10 || count["problem"] != 2 ||
		out.Items[50].Problem.Code != "unknown_type" || out.Items[51].Problem.Code != "invalid_submit" {
		t.Fatalf("results = %v, problems %+v %+v", count, out.Items[50].Problem, out.Items[51].Problem)
	}
	testenv.Eventually(t, 3*time.Minute, "the 40 exports to finish", func() bool {
		return e.count("SELECT count(*) FROM tasks WHERE status = 'SUCCESS'") == 40
	})
}
