package cleanup_test

import (
	"testing"
	"time"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs/cleanup"
)

func TestScratchIntervalIsAQuarterOfTheTTLBetweenAMinuteAndAnHour(t *testing.T) {
	t.Parallel()
	for ttl, want := range map[time.Duration]time.Duration{
		2 * time.Minute: time.Minute,      // a quarter is 30 s: raised to a minute
		time.Hour:       15 * time.Minute, // a quarter
		6 * time.Hour:   time.Hour,        // the default temp_ttl: a quarter is 90 min, capped at an hour
	} {
		if got := cleanup.ScratchInterval(ttl); got != want {
			t.Errorf("ScratchInterval(%s) = %s, want %s", ttl, got, want)
		}
	}
}

// Every process sweeps its own scratch dir, not only the node that runs the round: the
// sweeper sweeps as soon as it starts, deleting a dead attempt's entry and keeping the
// running attempt's.
func TestScratchSweeperSweepsThisNodeOnStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	moved := f.takenOver()
	dead := f.scratch(storage.AttemptPrefix(moved.TaskNo, 1), 2*time.Hour)
	running := f.scratch(storage.AttemptPrefix(moved.TaskNo, 2), 2*time.Hour)

	sw := cleanup.NewScratchSweeper(f.cleaner, time.Hour) // one sweep at start within the test
	sw.Start()
	t.Cleanup(sw.Stop)
	for deadline := time.Now().Add(10 * time.Second); exists(dead); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dead attempt's scratch entry is still there 10 s after the sweeper started")
		}
	}
	if !exists(running) {
		t.Fatal("the running attempt's scratch entry was deleted")
	}
}
