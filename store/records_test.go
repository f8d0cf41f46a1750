package store_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/audit"
	"github.com/taskcenter/taskcenter/store/stats"
	"github.com/taskcenter/taskcenter/store/storetest"
)

// A transition made with an audit in its context records its audit row in the same statement;
// one that is refused records nothing; one made without an audit (a worker's) records nothing.
func TestTransitionsRecordTheirAuditRowWithTheChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := &audit.Origin{Actor: "alice", Via: "token", ClientAddr: "203.0.113.9", RequestID: "req_1"}
	ctx := audit.NewContext(context.Background(), a)

	created, err := f.S.CreateMany(ctx, []store.NewTask{
		{TaskNo: "tsk_" + rand.Text(), Type: "export:customers", Owner: "alice", Queue: "exports", MaxRetry: 3, TimeoutSeconds: 60, Params: json.RawMessage(`{}`)},
		{TaskNo: "tsk_" + rand.Text(), Type: "export:customers", Owner: "alice", Queue: "exports", MaxRetry: 3, TimeoutSeconds: 60, Params: json.RawMessage(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Recorded() != 2 {
		t.Fatalf("two submits recorded %d rows", a.Recorded())
	}
	task := created[0].Task
	if _, err := f.S.CancelBy(ctx, task.TaskNo, store.Scope{Owner: "alice"}, "alice"); err != nil {
		t.Fatal(err)
	}
	var conflict *store.ConflictError
	if _, err := f.S.CancelBy(ctx, task.TaskNo, store.Scope{Owner: "alice"}, "alice"); !errors.As(err, &conflict) {
		t.Fatalf("second cancel: %v", err)
	}
	if _, err := f.S.Retry(ctx, task.TaskNo, store.Scope{Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.S.CancelBy(context.Background(), created[1].Task.TaskNo, store.Scope{Admin: true}, "ops"); err != nil {
		t.Fatal(err)
	}
	if a.Recorded() != 4 {
		t.Fatalf("recorded %d rows, want 4 (2 submits, a cancel, a retry)", a.Recorded())
	}
	rows, next, err := f.S.ListAudit(context.Background(), audit.Filter{})
	if err != nil || next != 0 {
		t.Fatal(err, next)
	}
	var got []string
	for _, r := range rows {
		if r.Actor != "alice" || r.ClientAddr != "203.0.113.9" || r.RequestID != "req_1" || r.Outcome != audit.Success || r.Via != "token" {
			t.Fatalf("row %+v", r)
		}
		got = append(got, r.Action+" "+r.Target)
	}
	want := []string{"task.retry " + task.TaskNo, "task.cancel " + task.TaskNo, "task.submit " + created[1].Task.TaskNo, "task.submit " + task.TaskNo}
	if len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[3] != want[3] {
		t.Fatalf("audit rows %v, want %v", got, want)
	}
	last, err := f.S.LastAudit(context.Background(), task.TaskNo, audit.ActionTaskCancel)
	if err != nil || last == nil || last.Actor != "alice" || last.Detail != "cancelled" {
		t.Fatalf("last cancel %+v %v", last, err)
	}
}

// A refusal nobody was identified for is counted: however many arrive at once, each client
// address, kind and minute has one row whose count is the attempts; other kinds, addresses
// and written rows stay apart.
func TestRefusalsAreCountedOnOneRowPerAddressKindAndMinute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	junk := audit.Event{Via: "bearer", Action: audit.ActionBadCredential, Outcome: audit.Denied, Status: 401, ClientAddr: "198.51.100.7", Detail: "first"}
	// A minute that turns during the flood would rightly split it in two rows: start with
	// most of one ahead.
	testenv.FreshMinute(t, f.DB)
	const flood = 200
	var wg sync.WaitGroup
	var written atomic.Int64
	for i := range flood {
		wg.Go(func() {
			e := junk
			e.Detail = fmt.Sprint("attempt ", i)
			n, err := f.S.CountAudit(ctx, e)
			if err != nil {
				t.Error(err)
			}
			written.Add(n)
		})
	}
	wg.Wait()
	throttled := junk
	throttled.Action, throttled.Status = audit.ActionThrottled, 429
	for _, e := range []audit.Event{throttled, throttled, {Action: audit.ActionNoCredential, Outcome: audit.Denied, Status: 401, ClientAddr: "198.51.100.7"},
		func() audit.Event { e := junk; e.ClientAddr = "203.0.113.5"; return e }()} {
		if _, err := f.S.CountAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.S.RecordAudit(ctx, audit.Event{Actor: "alice", Via: "token", Action: "task.cancel", Outcome: audit.Denied, Status: 403, ClientAddr: "198.51.100.7"}); err != nil {
		t.Fatal(err)
	}
	if written.Load() != flood {
		t.Fatalf("the calls say they wrote %d attempts, want %d", written.Load(), flood)
	}
	rows, _, err := f.S.ListAudit(ctx, audit.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %q %s %s %d ×%d", r.ClientAddr, r.Actor, r.Via, r.Action, r.Status, r.Count))
	}
	want := []string{
		`198.51.100.7 "alice" token task.cancel 403 ×1`,
		`203.0.113.5 "" bearer auth.bad_credential 401 ×1`,
		`198.51.100.7 ""  auth.no_credential 401 ×1`,
		`198.51.100.7 "" bearer auth.throttled 429 ×2`,
		fmt.Sprintf(`198.51.100.7 "" bearer auth.bad_credential 401 ×%d`, flood),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if first := rows[len(rows)-1]; !strings.HasPrefix(first.Detail, "attempt ") {
		t.Fatalf("the counted row's detail %q, want its first attempt's", first.Detail)
	}
}

// Every log line a transition writes is stored as its catalogue message beside its English,
// and the English the SQL writes is the catalogue's, word for word: a reader in any language
// renders the same line.
func TestTransitionsLogTheirLinesAsMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	alice := store.Scope{Owner: "alice"}

	// cancelled while waiting, retried, claimed again (a manual retry), cancel requested
	// while running, ended by the cancel.
	a := f.Task()
	f.cancel(a)
	if _, err := f.S.Retry(ctx, a.TaskNo, alice); err != nil {
		t.Fatal(err)
	}
	la := f.Claim(a, "w1")
	f.cancel(a)
	if _, err := f.S.EndCancelled(ctx, la); err != nil {
		t.Fatal(err)
	}
	// a transient failure, brought forward, a takeover, a failure with params, a timeout.
	b, _ := f.inStatus(store.StatusRetryWait)
	if _, err := f.S.ExpediteRetry(ctx, b.TaskNo, "ops"); err != nil {
		t.Fatal(err)
	}
	c, _, lc := f.takenOver()
	if _, err := f.S.EndFailedWith(ctx, lc, "all_rows_rejected", msg.Params{"total": "3"},
		msg.Render(msg.EN, "error.all_rows_rejected", msg.Params{"total": "3"})); err != nil {
		t.Fatal(err)
	}
	f.inStatus(store.StatusTimeout)
	d, _ := f.inStatus(store.StatusRunning)
	f.Exec("UPDATE tasks SET heartbeat_at = now() - interval '2 hours', timeout_seconds = 60 WHERE id = ?", d.ID)
	if _, err := f.S.TimeoutStale(ctx, 10); err != nil {
		t.Fatal(err)
	}
	_, le := f.inStatus(store.StatusRunning)
	if _, err := f.S.EndInterrupted(ctx, le, "interrupt.draining"); err != nil {
		t.Fatal(err)
	}

	var lines []store.LogEntry
	if err := f.DB.NewSelect().Model(&lines).Column("id", "task_id", "attempt", "level", "message", "code", "params", "created_at").
		OrderExpr("id").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l.Code] = true
		if !msg.Known(l.Code) {
			t.Errorf("line %q has code %q, not in the catalogue", l.Message, l.Code)
			continue
		}
		if got := msg.Render(msg.EN, l.Code, l.Params); got != l.Message {
			t.Errorf("line %q: its message %s %v reads %q", l.Message, l.Code, l.Params, got)
		}
		if zh := msg.Render(msg.ZH, l.Code, l.Params); zh == l.Message || zh == "" {
			t.Errorf("line %q reads the same in Chinese: %q", l.Message, zh)
		}
	}
	for _, code := range []string{"log.cancelled_by", "log.retry_requested_by", "log.attempt_started", "log.cancel_requested_by",
		"log.cancelled_running", "log.retrying", "log.retry_expedited_by", "log.failed", "log.timed_out", "log.timed_out_stale",
		"log.interrupted"} {
		if !seen[code] {
			t.Errorf("no %s line among %d lines", code, len(lines))
		}
	}

	// The failure's params are kept on the task and on its attempt.
	failed := f.Get(c.ID)
	if failed.ErrorCode != "all_rows_rejected" || failed.ErrorParams["total"] != "3" {
		t.Fatalf("task error %s %v", failed.ErrorCode, failed.ErrorParams)
	}
	var run store.Run
	if err := f.DB.NewSelect().Model(&run).Column("error", "error_code", "error_params").
		Where("task_id = ? AND attempt = ?", c.ID, lc.Attempt).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if run.ErrorCode != "all_rows_rejected" || run.ErrorParams["total"] != "3" {
		t.Fatalf("attempt error %q %s %v", run.Error, run.ErrorCode, run.ErrorParams)
	}
}

// The outbox names events with the SQL form of task.EventName: both must agree for every
// status, cancel requested or not, since live streams and webhooks compare names.
func TestTheOutboxNamesEventsAsTheDomainDoes(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPostgres(t)
	for _, st := range task.AllStatuses {
		for _, cancel := range []bool{false, true} {
			var got string
			err := pg.DB.DB.QueryRowContext(context.Background(),
				"SELECT "+task.EventNameSQL("s", "c")+" FROM (SELECT $1::text AS s, $2::bool AS c) v", string(st), cancel).Scan(&got)
			if err != nil {
				t.Fatal(err)
			}
			if want := task.EventName(st, cancel); got != want {
				t.Fatalf("%s (cancel requested %v): SQL names it %q, the domain %q", st, cancel, got, want)
			}
		}
	}
}

// The breakdown counts each rejected row once under every field at fault, most first, ties
// by name; another task's rows and an empty field list count nowhere. The archive's copy
// counts the same.
func TestRejectedRowsAreCountedByField(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task, other := f.Task(), f.Task()
	for i, fields := range []string{"phone", "phone,email", "email,name,level", "phone", "", "level"} {
		f.Exec("INSERT INTO task_items (task_id, row_no, field, message) VALUES (?, ?, ?, 'x')", task.ID, i+2, fields)
	}
	f.Exec("INSERT INTO task_items (task_id, row_no, field, message) VALUES (?, 2, 'name', 'x')", other.ID)
	f.wantBreakdown(task.ID, []store.FieldCount{{Field: "phone", Count: 3}, {Field: "email", Count: 2}, {Field: "level", Count: 2}, {Field: "name", Count: 1}})
	if got, err := f.S.RejectedByField(ctx, other.ID+1000, false); err != nil || len(got) != 0 {
		t.Fatalf("a task without rejected rows: %+v, %v", got, err)
	}
}

// Under each field the breakdown counts the rows by reason, the code of the field's message,
// most first: a reason keeps its params when its rows share them and drops them when they
// differ. A row stored without messages (before they were kept) counts under its fields
// with no reason. The messages are stored as written and read back with the rows, and the
// archive's copy counts the same.
func TestRejectedRowsAreCountedByFieldAndReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tk := f.Task()
	part := func(field, code string, params msg.Params) task.FieldMessage {
		return task.FieldMessage{Field: field, Code: code, Params: params}
	}
	items := []store.Item{
		{Row: 2, Messages: []task.FieldMessage{part("phone", "row.phone", nil)}},
		{Row: 3, Messages: []task.FieldMessage{part("phone", "row.phone", nil), part("email", "row.email", nil)}},
		{Row: 4, Messages: []task.FieldMessage{part("phone", "row.required", nil)}},
		{Row: 5, Messages: []task.FieldMessage{part("name", "row.too_long", msg.Params{"max": "100", "n": "120"})}},
		{Row: 6, Messages: []task.FieldMessage{part("code", "row.duplicate", msg.Params{"value": "K1", "row": "2"})}},
		{Row: 7, Messages: []task.FieldMessage{part("code", "row.duplicate", msg.Params{"value": "K2", "row": "3"})}},
		{Row: 8, Field: "phone,email", Message: "phone: must be 11 digits starting with 1; email: is not a valid email address"},
	}
	for i := range items {
		items[i].TaskID = tk.ID
		for _, p := range items[i].Messages {
			items[i].Field = strings.Trim(items[i].Field+","+p.Field, ",")
		}
	}
	if err := f.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return store.InsertItems(ctx, tx, items) }); err != nil {
		t.Fatal(err)
	}
	want := []store.FieldCount{
		{Field: "phone", Count: 4, Reasons: []store.ReasonCount{{Code: "row.phone", Count: 2}, {Code: "row.required", Count: 1}}},
		{Field: "code", Count: 2, Reasons: []store.ReasonCount{{Code: "row.duplicate", Count: 2}}},
		{Field: "email", Count: 2, Reasons: []store.ReasonCount{{Code: "row.email", Count: 1}}},
		{Field: "name", Count: 1, Reasons: []store.ReasonCount{{Code: "row.too_long", Params: msg.Params{"max": "100", "n": "120"}, Count: 1}}},
	}
	read, err := f.S.Items(ctx, tk.ID, 0, 10)
	if err != nil || len(read) != len(items) || !reflect.DeepEqual(read[1].Messages, items[1].Messages) || read[6].Messages != nil {
		t.Fatalf("rows read back (%v): %+v", err, read)
	}
	f.wantBreakdown(tk.ID, want)
}

// wantBreakdown fails the test unless the rejected rows of the task id break down as want,
// as they are and once they are copied to the archive.
func (f *fixture) wantBreakdown(id int64, want []store.FieldCount) {
	f.T.Helper()
	ctx := context.Background()
	if got, err := f.S.RejectedByField(ctx, id, false); err != nil || !reflect.DeepEqual(got, want) {
		f.T.Fatalf("breakdown\n%+v, %v; want\n%+v", got, err, want)
	}
	f.Exec("INSERT INTO task_items_archive (id, task_id, row_no, field, message, messages, raw, created_at) SELECT id, task_id, row_no, field, message, messages, raw, created_at FROM task_items WHERE task_id = ?", id)
	if got, err := f.S.RejectedByField(ctx, id, true); err != nil || !reflect.DeepEqual(got, want) {
		f.T.Fatalf("archived breakdown %+v, %v", got, err)
	}
}

// The log pages back from the newest line by line id, each line with its attempt; a page
// can keep to one attempt; the forward read returns the whole log in order.
func TestTheLogPagesBackByLineAndAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task := f.Task()
	for i := range 7 {
		f.Exec("INSERT INTO task_logs (task_id, attempt, level, message) VALUES (?, ?, 'info', ?)", task.ID, 1+i/4, fmt.Sprintf("line %d", i))
	}
	msgs := func(ls []store.LogEntry) (out []string) {
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%d:%s", l.Attempt, l.Message))
		}
		return out
	}
	page, err := f.S.LogPage(ctx, task.ID, store.LogQuery{Limit: 3})
	if got := msgs(page); err != nil || !slices.Equal(got, []string{"2:line 4", "2:line 5", "2:line 6"}) {
		t.Fatalf("newest page %q, %v", got, err)
	}
	page, _ = f.S.LogPage(ctx, task.ID, store.LogQuery{Limit: 3, Before: page[0].ID})
	if got := msgs(page); !slices.Equal(got, []string{"1:line 1", "1:line 2", "1:line 3"}) {
		t.Fatalf("earlier page %q", got)
	}
	page, _ = f.S.LogPage(ctx, task.ID, store.LogQuery{Limit: 3, Before: page[0].ID})
	if got := msgs(page); !slices.Equal(got, []string{"1:line 0"}) {
		t.Fatalf("earliest page %q", got)
	}
	page, _ = f.S.LogPage(ctx, task.ID, store.LogQuery{Limit: 10, Attempt: 1})
	if got := msgs(page); len(got) != 4 || got[3] != "1:line 3" {
		t.Fatalf("attempt 1 %q", got)
	}
	var all []store.LogEntry
	for after := int64(0); ; {
		ls, err := f.S.LogLines(ctx, task.ID, after, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		all, after = append(all, ls...), ls[len(ls)-1].ID
	}
	if got := msgs(all); len(got) != 7 || got[0] != "1:line 0" || got[6] != "2:line 6" {
		t.Fatalf("whole log %q", got)
	}
}

// Retention archives instead of deleting: the task, its runs, logs and rejected rows move in
// one transaction, a lookup by id still finds it, and the daily stats still count it (live and
// archived tasks alike); purging the archive keeps the stats.
func TestArchivedTaskIsFoundAndCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	done, _ := f.inStatus(store.StatusSuccess)
	failed, _ := f.inStatus(store.StatusFailed)
	live, _ := f.inStatus(store.StatusSuccess)
	f.Exec("INSERT INTO task_items (task_id, row_no, message) VALUES (?, 2, 'phone: bad')", done.ID)
	f.Exec("INSERT INTO task_logs (task_id, level, message) VALUES (?, 'info', 'imported 9 of 10 rows')", done.ID)
	f.Exec("UPDATE tasks SET started_at = finished_at - interval '40 seconds', total_count = 10, success_count = 9, failed_count = 1 WHERE id = ?", done.ID)

	n, err := f.S.ArchiveTasks(ctx, []int64{done.ID, failed.ID})
	if err != nil || n != 2 {
		t.Fatalf("archived %d: %v", n, err)
	}
	if _, err := f.S.Get(ctx, done.TaskNo, store.Scope{Owner: "alice"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the archived task is still live: %v", err)
	}
	got, err := f.S.GetArchived(ctx, done.TaskNo, store.Scope{Owner: "alice"})
	if err != nil || got.Status != store.StatusSuccess || got.SuccessCount != 9 {
		t.Fatalf("archived lookup: %+v %v", got, err)
	}
	if _, err := f.S.GetArchived(ctx, done.TaskNo, store.Scope{Owner: "bob"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("another user found alice's archived task")
	}
	runs, _ := f.S.ArchivedRuns(ctx, done.ID)
	logs, _ := f.S.ArchivedLogs(ctx, done.ID, 10)
	if len(runs) != 1 || len(logs) == 0 || f.Count("SELECT count(*) FROM task_items_archive") != 1 || f.Count("SELECT count(*) FROM task_items") != 0 {
		t.Fatalf("runs %d logs %d moved", len(runs), len(logs))
	}
	// Nothing of an archived task stays behind in the live tables (runs and events have no
	// foreign key to cascade from: ArchiveTasks deletes them itself); the live task keeps its.
	for _, table := range []string{"task_runs", "task_events", "task_logs", "task_items"} {
		if n := f.Count("SELECT count(*) FROM "+table+" WHERE task_id IN (?, ?)", done.ID, failed.ID); n != 0 {
			t.Fatalf("%d rows of archived tasks left in %s", n, table)
		}
	}
	if f.Count("SELECT count(*) FROM task_runs WHERE task_id = ?", live.ID) == 0 || f.Count("SELECT count(*) FROM task_events WHERE task_id = ?", live.ID) == 0 {
		t.Fatal("archiving took the live task's runs or events")
	}

	day := time.Now().UTC().Truncate(24 * time.Hour)
	counted, err := f.S.Stats(ctx, stats.Filter{From: day, To: day.Add(24 * time.Hour), GroupBy: []string{"status"}}, store.Scope{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[string]stats.Row{}
	for _, r := range counted {
		byStatus[r.Status] = r
	}
	if s := byStatus["SUCCESS"]; s.Tasks != 2 || s.RowsSuccess != 9 || s.P99Seconds != 60 {
		t.Fatalf("SUCCESS stats (one archived, one live %s) = %+v", live.TaskNo, s)
	}
	if byStatus["FAILED"].Tasks != 1 {
		t.Fatalf("stats = %+v", counted)
	}
	// Archive again (idempotent: nothing left), purge, stats stay.
	if n, _ := f.S.ArchiveTasks(ctx, []int64{done.ID}); n != 0 {
		t.Fatalf("archived a task twice: %d", n)
	}
	f.Exec("UPDATE tasks_archive SET archived_at = now() - interval '400 days'")
	if n, err := f.S.PurgeArchive(ctx, 365*24*time.Hour, 100); err != nil || n != 2 {
		t.Fatalf("purged %d: %v", n, err)
	}
	after, _ := f.S.Stats(ctx, stats.Filter{From: day, To: day.Add(24 * time.Hour)}, store.Scope{Admin: true})
	if len(after) != 1 || after[0].Tasks != 3 {
		t.Fatalf("stats after purge = %+v", after)
	}
}
