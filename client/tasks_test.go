package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/client"
	"github.com/taskcenter/taskcenter/httpapi"
	"github.com/taskcenter/taskcenter/internal/contracttest"
	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store"
)

// checkedServer serves h behind the API's contract: every request the client sends and
// every answer h gives must be what the OpenAPI document says.
func checkedServer(t *testing.T, h http.HandlerFunc) *client.Client {
	t.Helper()
	contract, err := contracttest.Load(httpapi.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(contract.Handler(t, h))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// view is a task as the server shows it.
func view(no string, status store.Status) httpapi.TaskView {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	return taskview.Of(&store.Task{ID: 1, TaskNo: no, Type: "import:customers", Owner: "alice", Queue: "imports", Status: status,
		Params: json.RawMessage(`{"filename":"budget.xlsx"}`), MaxRetry: 3, CreatedAt: now, UpdatedAt: now}, nil, now, msg.EN)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}

// A listing sends the search and the sort with every page's request, and reads the total
// and the counts per status.
func TestListSendsSearchAndSortAndReadsCounts(t *testing.T) {
	t.Parallel()
	var queries []string
	c := checkedServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/tasks" {
			t.Errorf("%s %s", r.Method, r.URL)
		}
		queries = append(queries, r.URL.RawQuery)
		counts := map[store.Status]int64{}
		for _, st := range []store.Status{"PENDING", "RUNNING", "RETRY_WAIT", "SUCCESS", "PARTIAL_SUCCESS", "FAILED", "TIMEOUT", "CANCELLED"} {
			counts[st] = 0
		}
		counts["FAILED"], counts["SUCCESS"] = 2, 5
		page := httpapi.ListView{Items: []httpapi.TaskView{view("tsk_A", "FAILED")}, Total: 2, Counts: counts, NextCursor: "ZmFpbGVkOjM6MQ"}
		if r.URL.Query().Has("cursor") {
			page.Items, page.NextCursor = []httpapi.TaskView{view("tsk_B", "FAILED")}, ""
		}
		writeJSON(w, page)
	})
	opts := client.ListOptions{Search: "budget", Sort: client.SortMostFailed, Status: []string{"FAILED"}, PageSize: 1}
	page, err := c.ListPage(context.Background(), opts, "")
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 2 || page.Counts["FAILED"] != 2 || page.Counts["SUCCESS"] != 5 || len(page.Counts) != 8 {
		t.Fatalf("total %d counts %v", page.Total, page.Counts)
	}
	var got []string
	for task, err := range c.List(context.Background(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, task.ID)
	}
	if !slices.Equal(got, []string{"tsk_A", "tsk_B"}) {
		t.Fatalf("listed %v", got)
	}
	want := []string{"limit=1&q=budget&sort=failed&status=FAILED", "limit=1&q=budget&sort=failed&status=FAILED",
		"cursor=ZmFpbGVkOjM6MQ&limit=1&q=budget&sort=failed&status=FAILED"}
	if !slices.Equal(queries, want) {
		t.Fatalf("queries:\n got %q\nwant %q", queries, want)
	}
}

// A bulk action names the tasks in one request and returns each one's result; a request
// refused as a whole is a *Problem.
func TestCancelManyAndRetryManyReturnEachTasksResult(t *testing.T) {
	t.Parallel()
	c := checkedServer(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ IDs []string }
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil {
			t.Errorf("body %q: %v", b, err)
		}
		if len(req.IDs) > client.MaxBulk {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			w.Write([]byte(`{"type":"/openapi.yaml#/components/x-problem-codes/invalid_ids","title":"Unprocessable Entity","status":422,` + //nolint:errcheck
				`"code":"invalid_ids","detail":"name from 1 to 100 task ids","request_id":"req_1","errors":[{"field":"ids","message":"must hold from 1 to 100 task ids (it holds 101)",` +
				`"code":"field_error.ids_count","params":{"max":"100","n":"101"}}]}`))
			return
		}
		status := store.StatusCancelled
		if r.URL.Path == "/api/v1/tasks/retry" {
			status = store.StatusPending
		}
		done := view(req.IDs[0], status)
		writeJSON(w, httpapi.BulkView{Results: []httpapi.BulkResult{
			{ID: req.IDs[0], Outcome: httpapi.BulkDone, Task: &done},
			{ID: req.IDs[1], Outcome: httpapi.BulkNotAllowed, Code: "status_conflict", Message: "cannot cancel a task that is SUCCESS"},
			{ID: req.IDs[2], Outcome: httpapi.BulkNotFound, Code: "task_not_found", Message: "no task with this id is visible to you"},
		}})
	})
	ctx := context.Background()
	for action, act := range map[string]func(context.Context, ...string) ([]client.BulkResult, error){"cancel": c.CancelMany, "retry": c.RetryMany} {
		res, err := act(ctx, "tsk_A", "tsk_B", "tsk_C")
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		if len(res) != 3 || res[0].Outcome != client.BulkDone || res[0].Task == nil || res[0].Task.ID != "tsk_A" ||
			res[1].Outcome != client.BulkNotAllowed || res[1].Message == "" || res[2].Outcome != client.BulkNotFound || res[2].Task != nil {
			t.Fatalf("%s: %+v", action, res)
		}
		if want := map[string]client.Status{"cancel": client.StatusCancelled, "retry": client.StatusPending}[action]; res[0].Task.Status != want {
			t.Fatalf("%s left the task %s", action, res[0].Task.Status)
		}
	}
	ids := make([]string, client.MaxBulk+1)
	for i := range ids {
		ids[i] = "tsk_A"
	}
	_, err := c.CancelMany(ctx, ids...)
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "invalid_ids" || len(p.Errors) != 1 || p.Errors[0].Field != "ids" {
		t.Fatalf("101 ids: %v", err)
	}
}

// A re-submit sends the earlier task and only the choices it changes, as the document's JSON
// body; a swept upload is a Problem the caller can tell by its code.
func TestResubmitImportSendsOnlyWhatChanges(t *testing.T) {
	t.Parallel()
	var sent []map[string]any
	c := checkedServer(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body) //nolint:errcheck
		sent = append(sent, body)
		if body["from_task"] == "tsk_SWEPT" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusGone)
			io.WriteString(w, `{"type":"/openapi.yaml#/components/x-problem-codes/upload_missing","title":"Gone","status":410,"code":"upload_missing","detail":"upload the file again"}`) //nolint:errcheck
			return
		}
		w.WriteHeader(http.StatusAccepted)
		writeJSON(w, map[string]any{"task": view("tsk_NEW", store.StatusPending), "duplicate": false})
	})
	off := false
	sub, err := c.ResubmitImport(context.Background(), client.ImportResubmit{FromTask: "tsk_OLD", Columns: map[string]string{"联系电话": "phone"}, DryRun: &off}, client.SubmitOptions{})
	if err != nil || sub.Task.ID != "tsk_NEW" {
		t.Fatalf("re-submit: %+v %v", sub, err)
	}
	if b := sent[0]; len(b) != 3 || b["from_task"] != "tsk_OLD" || b["dry_run"] != false || b["columns"].(map[string]any)["联系电话"] != "phone" {
		t.Fatalf("sent %v", b)
	}
	_, err = c.ResubmitImport(context.Background(), client.ImportResubmit{FromTask: "tsk_SWEPT"}, client.SubmitOptions{})
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "upload_missing" || p.Status != http.StatusGone {
		t.Fatalf("a swept upload: %v", err)
	}
}
