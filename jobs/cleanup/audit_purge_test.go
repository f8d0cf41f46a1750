package cleanup_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/jobs/cleanup"
	"github.com/taskcenter/taskcenter/store/audit"
)

// Audit rows older than auth.audit.retention are deleted, at most a batch per round, and
// younger ones stay; with no retention (0) every row is kept.
func TestRoundPurgesAuditRowsPastTheirRetentionInBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	ctx := context.Background()
	for _, target := range []string{"tsk_OLD1", "tsk_OLD2", "tsk_OLD3", "tsk_NEW"} {
		if err := f.S.RecordAudit(ctx, audit.Event{Actor: "alice", Action: "task.download", Target: target,
			Outcome: audit.Success}); err != nil {
			t.Fatal(err)
		}
	}
	f.Exec("UPDATE audit_events SET at = now() - interval '400 days' WHERE target LIKE 'tsk_OLD%'")

	if rep := f.cleaner.Round(ctx); rep.AuditPurged != 0 || f.Count("SELECT count(*) FROM audit_events") != 4 {
		t.Fatalf("report = %+v with no audit retention, want every row kept", rep)
	}

	cfg := f.cfg
	cfg.AuditRetention = 365 * 24 * time.Hour
	c := f.cleanerWith(cfg, cleanup.Deps{})
	if purged := perRound(c, 3, func(r cleanup.Report) int { return r.AuditPurged }); !slices.Equal(purged, []int{2, 1, 0}) {
		t.Fatalf("audit rows purged per round = %v, want 2,1,0 (bounded by the batch size)", purged)
	}
	if n := f.Count("SELECT count(*) FROM audit_events WHERE target = 'tsk_NEW'"); n != 1 || f.Count("SELECT count(*) FROM audit_events") != 1 {
		t.Fatal("want only the recent audit row left")
	}
}
