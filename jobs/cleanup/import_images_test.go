package cleanup_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/jobs/cleanup"
)

// The before-images of imports that ended longer ago than import.undo_ttl are deleted, at
// most a batch per round, and so are the leftovers of imports that are gone; a recent
// import's are kept, and so are the codes of an import that may still be retried.
func TestRoundDeletesExpiredImportImages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	ctx := context.Background()
	old, recent, failed := f.task(`{}`), f.task(`{}`), f.task(`{}`)
	f.Exec("UPDATE tasks SET status = 'SUCCESS', finished_at = now() - interval '8 days' WHERE id = ?", old.ID)
	f.Exec("UPDATE tasks SET status = 'SUCCESS', finished_at = now() - interval '1 day' WHERE id = ?", recent.ID)
	f.Exec("UPDATE tasks SET status = 'FAILED', finished_at = now() - interval '8 days' WHERE id = ?", failed.ID)
	for _, id := range []int64{old.ID, recent.ID} {
		f.Exec("INSERT INTO import_before_images (task_id, code, before) SELECT ?, 'C' || g, NULL FROM generate_series(1, 3) g", id)
	}
	f.Exec("INSERT INTO import_before_images (task_id, code, before) VALUES (999999, 'GONE', NULL)")
	f.Exec("INSERT INTO import_codes (task_id, code, row_no) VALUES (?, 'F1', 2), (999999, 'G1', 2)", failed.ID)

	if rep := f.cleaner.Round(ctx); rep.ImportImages != 0 {
		t.Fatalf("report = %+v with no undo TTL, want nothing deleted", rep)
	}
	cfg := f.cfg
	cfg.UndoTTL = 7 * 24 * time.Hour
	c := f.cleanerWith(cfg, cleanup.Deps{})
	if deleted := perRound(c, 4, func(r cleanup.Report) int { return r.ImportImages }); !slices.Equal(deleted, []int{3, 2, 0, 0}) {
		t.Fatalf("rows deleted per round = %v, want 3 (2 images + 1 code), 2, 0, 0", deleted)
	}
	if n := f.Count("SELECT count(*) FROM import_before_images WHERE task_id = ?", recent.ID); n != 3 || f.Count("SELECT count(*) FROM import_before_images") != 3 {
		t.Fatal("want only the recent import's before-images left")
	}
	if n := f.Count("SELECT count(*) FROM import_codes"); n != 1 || f.Count("SELECT count(*) FROM import_codes WHERE task_id = ?", failed.ID) != 1 {
		t.Fatal("want only the failed import's codes left (a retry may resume it)")
	}
}
