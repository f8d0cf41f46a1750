package cleanup_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
)

func TestRoundDeletesOnlyOldUnreferencedUploads(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	oldOrphan := f.file(storage.Uploads+"/aaa.xlsx", 2*time.Hour)
	oldInUse := f.file(storage.Uploads+"/bbb.xlsx", 2*time.Hour)
	young := f.file(storage.Uploads+"/ccc.xlsx", time.Minute)
	f.task(`{"upload":"uploads/bbb.xlsx"}`) // a PENDING import still needs it
	oldTemp := f.file(storage.ScratchDir+"/tsk_GONE-1.xlsx", 2*time.Hour)

	rep := f.cleaner.Round(ctx)
	if rep.UploadsDeleted != 1 || rep.TempDeleted != 1 {
		t.Fatalf("report = %+v", rep)
	}
	if exists(oldOrphan) || !exists(oldInUse) || !exists(young) || exists(oldTemp) {
		t.Fatalf("orphan=%v in-use=%v young=%v temp=%v; want only in-use and young left", exists(oldOrphan), exists(oldInUse), exists(young), exists(oldTemp))
	}
}

// Uploads are kept by their record, not their file's mtime: an upload untouched for the TTL
// that no live task needs is deleted with its record; one a waiting task needs, or accepted
// again since (the record touched), stays.
func TestRoundDeletesUploadsByTheirRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	stale := f.file(storage.Uploads+"/aaa.xlsx", 0)
	needed := f.file(storage.Uploads+"/bbb.xlsx", 0)
	touched := f.file(storage.Uploads+"/ccc.xlsx", 0)
	for _, rel := range []string{"aaa", "bbb", "ccc"} {
		if err := f.S.RecordUpload(ctx, storage.Uploads+"/"+rel+".xlsx", rel, 1); err != nil {
			t.Fatal(err)
		}
	}
	f.Exec("UPDATE uploads SET last_at = now() - interval '2 hours'")
	f.task(`{"upload":"uploads/bbb.xlsx"}`)
	if err := f.S.RecordUpload(ctx, storage.Uploads+"/ccc.xlsx", "ccc", 1); err != nil { // accepted again just now
		t.Fatal(err)
	}
	rep := f.cleaner.Round(ctx)
	if rep.UploadsDeleted != 1 || exists(stale) || !exists(needed) || !exists(touched) {
		t.Fatalf("report %+v; stale %v needed %v touched %v", rep, exists(stale), exists(needed), exists(touched))
	}
	var n int
	f.pg.DB.QueryRowContext(ctx, "SELECT count(*) FROM uploads").Scan(&n) //nolint:errcheck
	if n != 2 {
		t.Fatalf("%d upload records left, want 2", n)
	}
}
