package cleanup_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
)

// The temp-files step deletes what no running attempt writes any more, past TempTTL: the
// scratch entries of a dead attempt or of a task no longer running, and uploads abandoned
// under incoming/. A running attempt's entries (named with its attempt, or with none) and
// anything younger than the TTL stay.
func TestRoundDeletesDeadAttemptsScratchAndAbandonedIncoming(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	old := 2 * time.Hour // past the fixture's TempTTL

	moved := f.takenOver()
	dead := f.scratch(storage.AttemptPrefix(moved.TaskNo, 1), old)
	gone := f.scratch(storage.AttemptPrefix("tsk_GONE", 1), old)
	running := f.scratch(storage.AttemptPrefix(moved.TaskNo, 2), old)
	unnumbered := f.scratch(moved.TaskNo, old) // no attempt in its name: kept while the task runs
	young := f.scratch(storage.AttemptPrefix("tsk_YOUNG", 1), time.Minute)
	abandoned := f.file(storage.Incoming+"/abandoned.xlsx", old)
	receiving := f.file(storage.Incoming+"/receiving.xlsx", time.Minute)

	rep := f.cleaner.Round(context.Background())
	if rep.TempDeleted != 3 || rep.Errors != 0 {
		t.Fatalf("report = %+v, want 3 temp files deleted (two scratch entries, one incoming upload)", rep)
	}
	for p, want := range map[string]bool{dead: false, gone: false, abandoned: false,
		running: true, unnumbered: true, young: true, receiving: true} {
		if got := exists(p); got != want {
			t.Errorf("%s exists = %v after the round, want %v", p, got, want)
		}
	}
}
