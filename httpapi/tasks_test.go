package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/store"
)

// imported creates owner's PENDING import of a file named filename, as its upload would.
func (e *apiEnv) imported(owner, filename string) *store.Task {
	e.t.Helper()
	p := importer.Params{Filename: filename, Mode: importer.ModeUpsert}
	params, err := json.Marshal(p)
	if err != nil {
		e.t.Fatal(err)
	}
	task, _, err := e.st.Create(context.Background(), store.NewTask{TaskNo: jobs.NewTaskNo(), Type: importer.Type, Owner: owner,
		Queue: "imports", Title: p.TitleMessage().English(), Params: params, MaxRetry: 3, TimeoutSeconds: 60})
	if err != nil {
		e.t.Fatal(err)
	}
	return task
}

// list answers GET /api/v1/tasks?query as token, failing the test unless it is a list.
func (e *apiEnv) list(token, query string) ListView {
	e.t.Helper()
	rec := e.call("GET", "/api/v1/tasks?"+query, token, nil)
	var out ListView
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
		e.t.Fatalf("list %s: %d %s", query, rec.Code, rec.Body)
	}
	return out
}

func ids(views []TaskView) []string {
	return mapped(views, func(v TaskView) string { return v.ID })
}

// mapped is f of each of xs, in order.
func mapped[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// A search finds tasks by id, title and file name; the answer counts every status the other
// filters select and the total of the page's filters, within the caller's tasks only.
func TestListSearchesAndCounts(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	march := e.imported("alice", "Customers March.xlsx")
	april := e.imported("alice", "customers-april.csv")
	e.imported("alice", "suppliers.xlsx")
	e.imported("bob", "Customers March.xlsx")
	if _, err := e.st.Cancel(ctx, april.TaskNo, store.Scope{Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	e.finishedExport(nil)

	all := e.list(aliceToken, "")
	if all.Total != 4 || all.Counts[store.StatusPending] != 2 || all.Counts[store.StatusCancelled] != 1 || all.Counts[store.StatusSuccess] != 1 {
		t.Fatalf("alice's counts: total %d %v", all.Total, all.Counts)
	}
	if len(all.Counts) != 8 || all.Counts[store.StatusRunning] != 0 {
		t.Fatalf("every status is counted, zero or not: %v", all.Counts)
	}

	found := e.list(aliceToken, "q="+url.QueryEscape("CUSTOMERS"))
	if got := ids(found.Items); !slices.Equal(got, []string{april.TaskNo, march.TaskNo}) || found.Total != 2 {
		t.Fatalf("q=CUSTOMERS: %v total %d", got, found.Total)
	}
	// The status filter narrows the items and the total; the counts still show each status.
	found = e.list(aliceToken, "q=customers&status=PENDING")
	if got := ids(found.Items); !slices.Equal(got, []string{march.TaskNo}) || found.Total != 1 ||
		found.Counts[store.StatusPending] != 1 || found.Counts[store.StatusCancelled] != 1 {
		t.Fatalf("q=customers&status=PENDING: %v total %d counts %v", got, found.Total, found.Counts)
	}
	found = e.list(aliceToken, "q=customers&status=PENDING,CANCELLED")
	if found.Total != 2 {
		t.Fatalf("two statuses: total %d", found.Total)
	}
	// An id's start finds the task, in either case.
	found = e.list(aliceToken, "q="+strings.ToLower(march.TaskNo[:10]))
	if got := ids(found.Items); !slices.Contains(got, march.TaskNo) {
		t.Fatalf("an id's start: %v", got)
	}
	if got := ids(e.list(aliceToken, "q="+march.TaskNo).Items); !slices.Equal(got, []string{march.TaskNo}) {
		t.Fatalf("a whole id: %v", got)
	}
	// The job id the console shows for it (<task id>-a<attempt>) finds it too, with its total.
	if got := e.list(aliceToken, "q="+jobs.JobID(march.TaskNo, 2)); !slices.Equal(ids(got.Items), []string{march.TaskNo}) || got.Total != 1 {
		t.Fatalf("a console job id: %v total %d", ids(got.Items), got.Total)
	}
	// Wildcards are text; another user's tasks are not found, an admin's search finds both.
	if got := e.list(aliceToken, "q="+url.QueryEscape("%")); got.Total != 0 || len(got.Items) != 0 {
		t.Fatalf("q=%%: %+v", got)
	}
	if got := e.list(bobToken, "q=march"); got.Total != 1 {
		t.Fatalf("bob's search: %+v", got)
	}
	if got := e.list(adminToken, "q=march"); got.Total != 2 || got.Counts[store.StatusPending] != 2 {
		t.Fatalf("the admin's search: %+v", got)
	}
	if got := e.list(adminToken, "q=march&owner=bob"); got.Total != 1 {
		t.Fatalf("the admin's search of bob's: %+v", got)
	}
}

// Each sort pages through every task once, continuing with its own cursor; a cursor of
// another sort, an unknown sort and an over-long search are refused naming the parameter.
func TestListSortsPageWithTheirOwnCursor(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	var made []*store.Task
	for i := range 5 {
		made = append(made, e.imported("alice", "file"+string(rune('a'+i))+".xlsx"))
	}
	// Rejected rows 0, 1, 2, 0, 1 and run times of 0 to 3 seconds, the last one unfinished.
	for i, task := range made {
		var err error
		if i == 4 {
			_, err = e.pg.DB.ExecContext(ctx, `UPDATE tasks SET failed_count = ?, started_at = now() WHERE id = ?`, i%3, task.ID)
		} else {
			_, err = e.pg.DB.ExecContext(ctx, `UPDATE tasks SET failed_count = ?, started_at = now() - interval '1 hour',
				finished_at = now() - interval '1 hour' + make_interval(secs => ?) WHERE id = ?`, i%3, i, task.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	numbersOf := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, made[i].TaskNo)
		}
		return out
	}
	for _, c := range []struct {
		sort string
		want []string
	}{
		{"", numbersOf(4, 3, 2, 1, 0)},
		{"created", numbersOf(4, 3, 2, 1, 0)},
		{"-created", numbersOf(0, 1, 2, 3, 4)},
		{"duration", numbersOf(3, 2, 1, 0, 4)},
		{"-duration", numbersOf(0, 1, 2, 3, 4)},
		{"failed", numbersOf(2, 4, 1, 3, 0)},
		{"-failed", numbersOf(0, 3, 1, 4, 2)},
	} {
		var got []string
		query := "limit=2"
		if c.sort != "" {
			query += "&sort=" + c.sort
		}
		page := e.list(aliceToken, query)
		for {
			if page.Total != 5 {
				t.Fatalf("sort %q: total %d", c.sort, page.Total)
			}
			got = append(got, ids(page.Items)...)
			if page.NextCursor == "" {
				break
			}
			page = e.list(aliceToken, query+"&cursor="+page.NextCursor)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("sort %q:\n got %v\nwant %v", c.sort, got, c.want)
		}
	}

	byFailed := e.list(aliceToken, "limit=2&sort=failed")
	byCreated := e.list(aliceToken, "limit=2")
	for _, c := range []struct{ query, field, says string }{
		{"sort=created&cursor=" + byFailed.NextCursor, "cursor", "continues the sort failed, not created"},
		{"cursor=" + byFailed.NextCursor, "cursor", "continues the sort failed"},
		{"sort=-failed&cursor=" + byFailed.NextCursor, "cursor", "not -failed"},
		{"sort=duration&cursor=" + byCreated.NextCursor, "cursor", "continues the sort created"},
		{"sort=size", "sort", "must be created, -created, duration, -duration, failed or -failed"},
		{"sort=CREATED", "sort", "must be"},
		{"sort=", "sort", "must be"},
		{"q=" + strings.Repeat("x", 201), "q", "at most 200"},
	} {
		rec := e.call("GET", "/api/v1/tasks?"+c.query, aliceToken, nil)
		p := problemOf(t, rec)
		if rec.Code != http.StatusBadRequest || p.Code != "invalid_query" || len(p.Errors) != 1 || p.Errors[0].Field != c.field ||
			!strings.Contains(p.Errors[0].Message, c.says) {
			t.Errorf("%s: %d %+v", c.query, rec.Code, p)
		}
	}
	// The same cursor with its own sort continues.
	if got := e.list(aliceToken, "limit=2&sort=failed&cursor="+byFailed.NextCursor); len(got.Items) != 2 {
		t.Fatalf("the failed-rows cursor with its sort: %+v", got)
	}
}

// The task export takes the list's search in its filter and writes the tasks it finds.
func TestTaskExportFilterTakesTheSearch(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	rec := e.callJSON("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "tasks", "filter": map[string]any{"q": "march"}})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("export with q: %d %s", rec.Code, rec.Body)
	}
	rec = e.callJSON("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "tasks", "filter": map[string]any{"q": strings.Repeat("x", 201)}})
	p := problemOf(t, rec)
	if rec.Code != http.StatusUnprocessableEntity || p.Code != "bad_filter" || p.Errors[0].Field != "filter.q" {
		t.Fatalf("export with a long q: %d %+v", rec.Code, p)
	}
	// The field's problem is a message a Chinese reader gets in Chinese.
	if f := p.Errors[0]; f.Message != "must be at most 200 characters" || msg.Render(msg.ZH, f.Code, f.Params) != "最多 200 个字符" {
		t.Errorf("the long q's field error: %+v, in Chinese %q", f, msg.Render(msg.ZH, f.Code, f.Params))
	}
}

// The title the product gives a task comes with its message, and in the language the request
// accepts (English by default); a title the submitter wrote is theirs in every language.
func TestTaskTitlesComeInTheRequestsLanguage(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	rec := e.callJSON("POST", "/api/v1/exports", aliceToken, map[string]any{"type": "customers", "filter": map[string]any{"city": "Shanghai", "level": "gold"}})
	var submitted SubmitView
	if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &submitted) != nil {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	rec = e.callJSON("POST", "/api/v1/tasks", aliceToken, map[string]any{"type": "export:customers", "title": "Quarterly customers"})
	var own SubmitView
	if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &own) != nil {
		t.Fatalf("submit with a title: %d %s", rec.Code, rec.Body)
	}
	product := submitted.Task
	if m := product.TitleMessage; product.Title != "Customers in Shanghai, level gold" || m == nil || m.Code != "title.export_customers" {
		t.Fatalf("the submit's answer: title %q, message %+v", product.Title, m)
	}
	for _, tc := range []struct {
		accept        string
		product, mine string
	}{
		{"", "Customers in Shanghai, level gold", "Quarterly customers"},
		{"zh-CN,zh;q=0.9,en;q=0.8", "客户导出：Shanghai，黄金", "Quarterly customers"},
	} {
		var headers []string
		if tc.accept != "" {
			headers = []string{"Accept-Language", tc.accept}
		}
		rec := e.call("GET", "/api/v1/tasks", aliceToken, nil, headers...)
		var list ListView
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &list) != nil {
			t.Fatalf("list: %d %s", rec.Code, rec.Body)
		}
		titles := map[string]TaskView{}
		for _, v := range list.Items {
			titles[v.ID] = v
		}
		if v := titles[product.ID]; v.Title != tc.product || v.TitleMessage == nil {
			t.Errorf("Accept-Language %q: the product's title %q (message %+v), want %q", tc.accept, v.Title, v.TitleMessage, tc.product)
		}
		if v := titles[own.Task.ID]; v.Title != tc.mine || v.TitleMessage != nil {
			t.Errorf("Accept-Language %q: the submitter's title %q (message %+v), want %q", tc.accept, v.Title, v.TitleMessage, tc.mine)
		}
		rec = e.call("GET", "/api/v1/tasks/"+product.ID, aliceToken, nil, headers...)
		var one DetailView
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &one) != nil || one.Title != tc.product {
			t.Errorf("Accept-Language %q: the task's title %q, want %q (%d)", tc.accept, one.Title, tc.product, rec.Code)
		}
	}
}

// The detail of an import with rejected rows counts them by field; its owner (and an admin)
// pages the whole log back from the newest line, by attempt if asked, and downloads it as
// text, audited; anybody else is told the task does not exist.
func TestTheDetailExplainsRejectedRowsAndTheWholeLogPages(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	imp := e.finishedImport(nil)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := e.pg.DB.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE tasks SET failed_count = 3 WHERE id = ?`, imp.ID)
	for i, f := range []string{"phone,email", "phone", "name"} {
		exec(`INSERT INTO task_items (task_id, row_no, field, message) VALUES (?, ?, ?, 'x')`, imp.ID, i+2, f)
	}
	// Rows stored with their messages count by reason too; params only where the rows share them.
	exec(`UPDATE tasks SET failed_count = 5 WHERE id = ?`, imp.ID)
	exec(`INSERT INTO task_items (task_id, row_no, field, message, messages) VALUES
		(?, 5, 'code', 'x', '[{"field":"code","code":"row.duplicate","params":{"value":"K1","row":"2"}}]'),
		(?, 6, 'code', 'x', '[{"field":"code","code":"row.duplicate","params":{"value":"K2","row":"3"}}]'),
		(?, 7, 'phone', 'x', '[{"field":"phone","code":"row.rounded","params":{"value":"1.38E+10"}}]')`, imp.ID, imp.ID, imp.ID)
	exec(`DELETE FROM task_logs WHERE task_id = ?`, imp.ID)
	for i := range 5 {
		exec(`INSERT INTO task_logs (task_id, attempt, level, message) VALUES (?, ?, 'info', ?)`, imp.ID, 1+i/3, fmt.Sprintf("line %d", i))
	}
	exec(`INSERT INTO task_logs (task_id, attempt, level, message) VALUES (?, 2, 'warn', E'two\nlines')`, imp.ID)

	rec := e.call("GET", "/api/v1/tasks/"+imp.TaskNo, aliceToken, nil)
	var d DetailView
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &d) != nil {
		t.Fatalf("detail: %d %s", rec.Code, rec.Body)
	}
	want := []FieldCountView{
		{Field: "phone", Count: 3, Reasons: []ReasonCountView{{Code: "row.rounded", Params: msg.Params{"value": "1.38E+10"}, Count: 1,
			Says: msg.Message{Code: "row.rounded", Params: msg.Params{"value": "1.38E+10"}}}}},
		// The rows repeat different codes: the reason is said without them.
		{Field: "code", Count: 2, Reasons: []ReasonCountView{{Code: "row.duplicate", Count: 2, Says: msg.Message{Code: "reason.duplicate"}}}},
		{Field: "email", Count: 1, Reasons: []ReasonCountView{}}, {Field: "name", Count: 1, Reasons: []ReasonCountView{}}}
	if !reflect.DeepEqual(d.RejectedBreakdown, want) {
		t.Fatalf("breakdown %+v, want %+v", d.RejectedBreakdown, want)
	}

	page := func(token, query string) LogPageView {
		t.Helper()
		rec := e.call("GET", "/api/v1/tasks/"+imp.TaskNo+"/logs?"+query, token, nil)
		var p LogPageView
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
			t.Fatalf("logs?%s: %d %s", query, rec.Code, rec.Body)
		}
		return p
	}
	lines := func(p LogPageView) (out []string) {
		for _, l := range p.Items {
			out = append(out, fmt.Sprintf("%d %s", l.Attempt, l.Message))
		}
		return out
	}
	var got []string
	cursor, pages := "", 0
	for {
		p := page(aliceToken, "limit=2&cursor="+cursor)
		got, pages = append(lines(p), got...), pages+1
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	wantLines := []string{"1 line 0", "1 line 1", "1 line 2", "2 line 3", "2 line 4", "2 two\nlines"}
	if !slices.Equal(got, wantLines) || pages != 3 {
		t.Fatalf("paged back in %d pages: %q, want %q", pages, got, wantLines)
	}
	if got := lines(page(adminToken, "attempt=1")); !slices.Equal(got, wantLines[:3]) {
		t.Fatalf("attempt 1, as an admin: %q", got)
	}
	if p := page(aliceToken, "attempt=9"); len(p.Items) != 0 || p.NextCursor != "" {
		t.Fatalf("an attempt that never ran: %+v", p)
	}
	for _, q := range []string{"limit=0", "limit=1001", "attempt=0", "attempt=x", "cursor=nope"} {
		rec := e.call("GET", "/api/v1/tasks/"+imp.TaskNo+"/logs?"+q, aliceToken, nil)
		if p := problemOf(t, rec); rec.Code != http.StatusBadRequest || p.Code != "invalid_query" {
			t.Fatalf("logs?%s: %d %+v, want 400 invalid_query", q, rec.Code, p)
		}
	}

	rec = e.call("GET", "/api/v1/tasks/"+imp.TaskNo+"/logs.txt", aliceToken, nil)
	text := rec.Body.String()
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Disposition") != storage.ContentDisposition(imp.TaskNo+"-log.txt") ||
		!strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("download: %d %v", rec.Code, rec.Header())
	}
	if !strings.HasPrefix(text, "# log of task "+imp.TaskNo+"\n\n== attempt 1 ==\n") || !strings.Contains(text, "line 2\n\n== attempt 2 ==\n") ||
		!strings.HasSuffix(text, ` two\nlines`+"\n") || strings.Count(text, "\n") != 11 {
		t.Fatalf("the downloaded log:\n%s", text)
	}
	if rows := e.auditRows("action=task.download_log"); len(rows) != 1 || rows[0].Outcome != "success" || rows[0].Actor != "alice" {
		t.Fatalf("audit rows of the download: %+v", rows)
	}

	for _, path := range []string{"/logs", "/logs.txt"} {
		rec := e.call("GET", "/api/v1/tasks/"+imp.TaskNo+path, bobToken, nil)
		if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "line") {
			t.Fatalf("bob reads alice's %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	if rec := e.call("GET", "/api/v1/tasks/"+imp.TaskNo+"/logs", adminToken, nil); rec.Code != http.StatusOK {
		t.Fatalf("an admin reads alice's log: %d", rec.Code)
	}

	// Archived, the same log and counts are read from the archive.
	if n, err := e.st.ArchiveTasks(ctx, []int64{imp.ID}); err != nil || n != 1 {
		t.Fatalf("archive: %d %v", n, err)
	}
	if got := lines(page(aliceToken, "limit=100")); !slices.Equal(got, wantLines) {
		t.Fatalf("archived log: %q", got)
	}
	rec = e.call("GET", "/api/v1/tasks/"+imp.TaskNo, aliceToken, nil)
	d = DetailView{}
	if json.Unmarshal(rec.Body.Bytes(), &d) != nil || !d.Archived || !reflect.DeepEqual(d.RejectedBreakdown, want) {
		t.Fatalf("archived detail: %d %s", rec.Code, rec.Body)
	}
}

// A running task's live progress (Redis) is what the list shows, as its own page does: the
// rows' per-batch copy lags behind it, and a list read must not step a page back.
func TestTheListShowsARunningTasksLiveProgress(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	running, waiting := e.imported("alice", "live.xlsx"), e.imported("alice", "later.xlsx")
	if _, err := e.pg.DB.ExecContext(ctx, `UPDATE tasks SET status = 'RUNNING', attempt = 1, started_at = now(),
		progress_current = 50, progress_total = 3000, total_count = 50, success_count = 48, failed_count = 2 WHERE id = ?`, running.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Board.Set(ctx, running.TaskNo, "alice", 250, 3000, task.Counts{Total: 250, Success: 240, Failed: 10}); err != nil {
		t.Fatal(err)
	}
	var detail DetailView
	if rec := e.call("GET", "/api/v1/tasks/"+running.TaskNo, aliceToken, nil); rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &detail) != nil {
		t.Fatalf("detail: %d %s", rec.Code, rec.Body)
	}
	byID := map[string]TaskView{}
	for _, v := range e.list(aliceToken, "").Items {
		byID[v.ID] = v
	}
	got := byID[running.TaskNo]
	if got.Progress.Current != 250 || got.Counts.Success != 240 || got.Progress != detail.Progress || got.Counts != detail.Counts {
		t.Fatalf("list shows progress %+v counts %+v; the task's page %+v %+v; want 250 and 240 on both",
			got.Progress, got.Counts, detail.Progress, detail.Counts)
	}
	if v := byID[waiting.TaskNo]; v.Status != store.StatusPending {
		t.Fatalf("the waiting task: %+v", v)
	}
}
