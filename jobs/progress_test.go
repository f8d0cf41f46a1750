package jobs

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/internal/testenv"
)

func TestProgressBoardKeepsTheFirstSampleForTheSpeed(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	ctx := context.Background()
	board := NewProgressBoard(rd.Client)
	defer board.Close()
	no := "tsk_" + rand.Text()
	if err := board.Set(ctx, no, "alice", 100, 1000, task.Counts{}); err != nil {
		t.Fatal(err)
	}
	if err := board.Set(ctx, no, "alice", 300, 1000, task.Counts{}); err != nil {
		t.Fatal(err)
	}
	live, ok, err := board.Get(ctx, no)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if live.First == nil || live.First.Current != 100 || !live.First.At.Before(live.Progress.UpdatedAt) {
		t.Fatalf("first sample %+v, progress %+v", live.First, live.Progress)
	}
	rate, eta := task.Speed(*live.First, task.Sample{Current: 300, At: live.Progress.UpdatedAt}, 1000)
	if rate <= 0 || eta == nil || !eta.After(live.Progress.UpdatedAt) {
		t.Errorf("speed %v, eta %v", rate, eta)
	}
	// A hash left by a writer that kept no first sample still reads, with no speed.
	rd.Client.HDel(ctx, progressKey(no), "first_current", "first_at")
	if err := board.Set(ctx, no, "alice", 200, 1000, task.Counts{}); err != nil { // behind: not written
		t.Fatal(err)
	}
	if live, _, _ := board.Get(ctx, no); live.First != nil {
		t.Errorf("first sample from nowhere: %+v", live.First)
	}
}
