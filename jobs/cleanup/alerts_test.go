package cleanup_test

import (
	"context"
	"testing"

	"github.com/taskcenter/taskcenter/internal/testenv"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
)

// failureAlerts is a jobs.Alerter that keeps every alert.
type failureAlerts struct{ testenv.Collector[jobs.Alert] }

func (a *failureAlerts) TaskFailed(_ context.Context, al jobs.Alert) { a.Add(al) }

func (a *failureAlerts) sent() []jobs.Alert { return a.Since(0) }

// A worker that failed a task and died before sending its alert leaves the alert due on the
// row. The round leaves it to that worker for a grace period, then sends it, once.
func TestRoundSendsTheFailureAlertADeadWorkerOwed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	tk, lease := f.running("w")
	if _, err := f.S.EndGaveUp(ctx, lease, "retries_exhausted", "the export kept failing"); err != nil {
		t.Fatal(err)
	}
	alerts := &failureAlerts{}
	cleaner := f.cleanerWith(f.cfg, cleanup.Deps{TaskAlerter: alerts})

	if rep := cleaner.Round(ctx); rep.FailureAlerts != 0 || len(alerts.sent()) != 0 {
		t.Fatalf("report = %+v, alerts %+v: want the fresh alert left to its worker", rep, alerts.sent())
	}
	f.Exec("UPDATE tasks SET alert_due_at = now() - interval '1 minute' WHERE id = ?", tk.ID)
	if rep := cleaner.Round(ctx); rep.FailureAlerts != 1 {
		t.Fatalf("report = %+v, want the overdue alert sent", rep)
	}
	if rep := cleaner.Round(ctx); rep.FailureAlerts != 0 {
		t.Fatalf("report = %+v, want the alert sent once", rep)
	}
	got := alerts.sent()
	if len(got) != 1 || got[0].TaskNo != tk.TaskNo || got[0].Attempts != 1 || got[0].Message != "the export kept failing" {
		t.Fatalf("alerts sent = %+v, want one for %s, attempt 1, with the task's error", got, tk.TaskNo)
	}
}
