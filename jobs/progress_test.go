package jobs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// Notices are published in the order they were made, and Close publishes what is queued.
func TestProgressBoardPublishesInOrderAndFlushesOnClose(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	ctx := context.Background()
	ps := rd.Client.Subscribe(ctx, EventsChannel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	board := NewProgressBoard(rd.Client)
	// The channel is server-wide (pub/sub ignores the database number): tests running at the
	// same time publish on it too, so this one's notices carry an owner of its own.
	owner := "board-test-" + rand.Text()
	const n = 2000
	for i := range n {
		if err := board.Changed(ctx, fmt.Sprintf("tsk_%04d", i), owner); err != nil {
			t.Fatal(err)
		}
	}
	board.Close()
	if err := board.Changed(ctx, "tsk_late", owner); err == nil {
		t.Fatal("a closed board accepted a notice")
	}
	msgs := ps.Channel(redis.WithChannelSize(n))
	for i := 0; i < n; {
		select {
		case m := <-msgs:
			var got Notice
			if err := json.Unmarshal([]byte(m.Payload), &got); err != nil {
				t.Fatal(err)
			}
			if got.Owner != owner {
				continue // another test's
			}
			if want := fmt.Sprintf("tsk_%04d", i); got.TaskNo != want {
				t.Fatalf("notice %d is %s", i, got.TaskNo)
			}
			i++
		case <-time.After(5 * time.Second):
			t.Fatalf("notice %d never arrived", i)
		}
	}
}

// With Redis held up mid-publish, notices back up and new ones are dropped at once with an
// error: a submit or an ending never waits on the live streams' channel.
func TestProgressBoardDropsNoticesRatherThanWait(t *testing.T) {
	t.Parallel()
	rd := testenv.NewRedis(t)
	proxy := testenv.NewProxy(t, rd.Addr)
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: rd.DB})
	defer client.Close()
	board := NewProgressBoard(client)
	defer board.Close()
	ctx := context.Background()
	held := proxy.Hold([]byte(EventsChannel))
	if err := board.Changed(ctx, "tsk_first", "alice"); err != nil {
		t.Fatal(err)
	}
	<-held
	start := time.Now()
	dropped := 0
	for i := range noticeQueue + 2*noticeBatch {
		if board.Changed(ctx, fmt.Sprintf("tsk_%d", i), "alice") != nil {
			dropped++
		}
	}
	if took := time.Since(start); dropped == 0 || took > time.Second {
		t.Fatalf("%d of %d notices dropped in %s with Redis held; want some dropped, none waited for",
			dropped, noticeQueue+2*noticeBatch, took)
	}
	// Shutting down with Redis still held does not wait for the queued notices.
	start = time.Now()
	board.Close()
	if took := time.Since(start); took > closeWait+time.Second {
		t.Fatalf("Close with Redis held took %s", took)
	}
	proxy.Cut()
}
