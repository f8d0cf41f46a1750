package store_test

import (
	"context"
	"testing"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/store"
)

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
