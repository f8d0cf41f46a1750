package cleanup_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/store"
)

// A worker killed after moving its result into place and before recording it leaves a file
// no row points at. Once the task has moved on (taken over, ended), that file is deleted;
// a recorded result, a running attempt's fresh output and foreign files are kept.
func TestRoundDeletesResultFilesNoTaskRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	ctx := context.Background()
	old := 2 * time.Hour // past the fixture's TempTTL

	recorded, recordedPath := f.succeeded(24 * time.Hour)
	os.Chtimes(recordedPath, time.Now().Add(-old), time.Now().Add(-old)) //nolint:errcheck

	moved := f.takenOver() // attempt 1 wrote its file and died; attempt 2 runs now
	dead := f.file(storage.Results+"/"+moved.TaskNo+"-a1.xlsx", old)
	running, _ := f.running("w") // its attempt has written the file and is about to record it
	live := f.file(storage.Results+"/"+running.TaskNo+"-a1-errors.xlsx", old)
	foreign := f.file(storage.Results+"/README.txt", old)

	rep := f.cleaner.Round(ctx)
	if rep.ResultsOrphaned != 1 || exists(dead) {
		t.Fatalf("report %+v; the dead attempt's file exists: %v", rep, exists(dead))
	}
	for _, p := range []string{recordedPath, live, foreign} {
		if !exists(p) {
			t.Fatalf("%s was deleted", p)
		}
	}
	if got := f.Get(recorded.ID); got.Status != store.StatusSuccess {
		t.Fatal(got.Status)
	}
}
