package client_test

import (
	"bytes"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/client"
	"github.com/taskcenter/taskcenter/httpapi"
)

// A task's log pages back with the attempt, the page size and the cursor on each request;
// the whole log downloads as text with the server's name for it; a refusal is a Problem.
// The detail's breakdown of rejected rows reads into the task.
func TestTheLogPagesBackAndDownloads(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var queries []string
	c := checkedServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tasks/tsk_A":
			writeJSON(w, httpapi.DetailView{TaskView: view("tsk_A", "PARTIAL_SUCCESS"), Attempts: []httpapi.AttemptView{}, Logs: []httpapi.LogView{},
				RejectedBreakdown: []httpapi.FieldCountView{{Field: "phone", Count: 414, Reasons: []httpapi.ReasonCountView{{Code: "row.phone", Count: 400},
					{Code: "row.required", Count: 14}}}, {Field: "email", Count: 206, Reasons: []httpapi.ReasonCountView{}}}})
		case "/api/v1/tasks/tsk_A/logs":
			queries = append(queries, r.URL.RawQuery)
			p := httpapi.LogPageView{Items: []httpapi.LogView{{At: at, Attempt: 2, Level: "info", Message: "imported"}}, NextCursor: "bG9nOjU"}
			if r.URL.Query().Get("cursor") != "" {
				p = httpapi.LogPageView{Items: []httpapi.LogView{{At: at, Attempt: 1, Level: "warn", Message: "retrying"}}}
			}
			writeJSON(w, p)
		case "/api/v1/tasks/tsk_A/logs.txt":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Content-Disposition", `attachment; filename="tsk_A-log.txt"`)
			w.Write([]byte("# log of task tsk_A\n")) //nolint:errcheck
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"type":"/openapi.yaml#/components/x-problem-codes/task_not_found","title":"Not Found","status":404,"code":"task_not_found","detail":"no such task"}`)) //nolint:errcheck
		}
	})
	ctx := t.Context()
	task, err := c.Get(ctx, "tsk_A")
	want := []client.FieldCount{{Field: "phone", Count: 414, Reasons: []client.ReasonCount{{Code: "row.phone", Count: 400}, {Code: "row.required", Count: 14}}},
		{Field: "email", Count: 206, Reasons: []client.ReasonCount{}}}
	if err != nil || !reflect.DeepEqual(task.RejectedBreakdown, want) {
		t.Fatalf("breakdown %+v, %v", task, err)
	}
	first, err := c.LogPage(ctx, "tsk_A", client.LogOptions{Attempt: 2, Limit: 50}, "")
	if err != nil || len(first.Items) != 1 || first.Items[0].Attempt != 2 || first.NextCursor == "" {
		t.Fatalf("first page %+v, %v", first, err)
	}
	earlier, err := c.LogPage(ctx, "tsk_A", client.LogOptions{}, first.NextCursor)
	if err != nil || len(earlier.Items) != 1 || earlier.Items[0].Message != "retrying" || earlier.NextCursor != "" {
		t.Fatalf("earlier page %+v, %v", earlier, err)
	}
	if want := []string{"attempt=2&limit=50", "cursor=bG9nOjU"}; !slices.Equal(queries, want) {
		t.Fatalf("queries %q, want %q", queries, want)
	}
	var buf bytes.Buffer
	d, err := c.DownloadLog(ctx, "tsk_A", &buf)
	if err != nil || d.Name != "tsk_A-log.txt" || buf.String() != "# log of task tsk_A\n" || d.Size != int64(buf.Len()) {
		t.Fatalf("download %+v %q, %v", d, buf.String(), err)
	}
	var p *client.Problem
	if _, err := c.DownloadLog(ctx, "tsk_B", &buf); !errors.As(err, &p) || p.Status != http.StatusNotFound {
		t.Fatalf("a task not found: %v", err)
	}
}
