package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/taskcenter/taskcenter/internal/storage"
)

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
	want := []FieldCountView{{"phone", 2}, {"email", 1}, {"name", 1}}
	if !slices.Equal(d.RejectedBreakdown, want) {
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
	if json.Unmarshal(rec.Body.Bytes(), &d) != nil || !d.Archived || !slices.Equal(d.RejectedBreakdown, want) {
		t.Fatalf("archived detail: %d %s", rec.Code, rec.Body)
	}
}
