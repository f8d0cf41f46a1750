package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskcenter/taskcenter/internal/batch"
	"github.com/taskcenter/taskcenter/internal/task"
)

// Progress is a running task's progress as readers see it (internal/task).
type Progress = task.Progress

// ProgressBoard keeps live progress in a Redis hash per task (current, total, percent,
// updated_at) with a TTL. The database holds the per-batch copy; readers fall back to it.
//
// It also announces changes on one Redis pub/sub channel (EventsChannel), for live streams:
// a "progress" message each time progress is written, and a "changed" message after every
// committed status change. A "changed" message carries no state: listeners read the task's
// committed events from the outbox (store.TaskEvents), so nothing is announced that did not
// commit, and a lost message only delays, never loses, an event.
//
// Notices are published by one goroutine per board, in the order they were made, many per
// round trip (a pipeline): a submit or an ending does not wait on Redis for them. When Redis
// cannot keep up (or is down) and notices back up, new ones are dropped; that only delays
// what streams show until their next outbox poll.
type ProgressBoard struct {
	rdb     redis.UniversalClient
	ttl     time.Duration
	notices *batch.Batcher[outNotice]
}

type outNotice struct{ body []byte }

// EventsChannel is the Redis pub/sub channel of live task events.
const EventsChannel = "taskcenter:events"

// Notice is one message on EventsChannel.
type Notice struct {
	Kind     string    `json:"kind"` // progress | changed
	TaskNo   string    `json:"task_no"`
	Owner    string    `json:"owner"`
	Progress *Progress `json:"progress,omitempty"`
	// Counts are the task's counts as of the batch the progress belongs to, so that a live
	// view shows counts and progress of the same moment.
	Counts *task.Counts `json:"counts,omitempty"`
}

// Notice kinds.
const (
	NoticeProgress = "progress"
	NoticeChanged  = "changed"
)

// NewProgressBoard returns a board on rdb.
func NewProgressBoard(rdb redis.UniversalClient) *ProgressBoard {
	b := &ProgressBoard{rdb: rdb, ttl: 24 * time.Hour}
	b.notices = batch.New(batch.Config{MaxBatch: noticeBatch, Queue: noticeQueue}, b.publishBatch)
	return b
}

// noticeQueue is how many notices may wait for the publisher; noticeBatch how many go in one
// round trip.
const (
	noticeQueue = 8192
	noticeBatch = 256
)

func progressKey(taskNo string) string { return "taskcenter:progress:{" + taskNo + "}" }

// setProgress only moves forward, so a late write from a slower path never shows a drop. The
// first write since the hash was cleared is kept as the start of the task's speed.
var setProgress = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], 'current') or '-1')
if tonumber(ARGV[1]) >= cur then
  redis.call('HSET', KEYS[1], 'current', ARGV[1], 'total', ARGV[2], 'percent', ARGV[3], 'updated_at', ARGV[4],
    'rows_total', ARGV[6], 'rows_success', ARGV[7], 'rows_failed', ARGV[8])
  redis.call('HSETNX', KEYS[1], 'first_current', ARGV[1])
  redis.call('HSETNX', KEYS[1], 'first_at', ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return redis.call('HMGET', KEYS[1], 'first_current', 'first_at')`)

// Set records progress for a running task and announces it with the task's counts.
func (b *ProgressBoard) Set(ctx context.Context, taskNo, owner string, current, total int64, counts task.Counts) error {
	now := time.Now().UTC()
	first, err := setProgress.Run(ctx, b.rdb, []string{progressKey(taskNo)},
		current, total, task.Percent(current, total, false), now.Format(time.RFC3339Nano), b.ttl.Milliseconds(),
		counts.Total, counts.Success, counts.Failed).Slice()
	if err != nil {
		return err
	}
	p := &Progress{Current: current, Total: total, Percent: task.Percent(current, total, false), UpdatedAt: now}
	fields := make([]string, len(first))
	for i, f := range first {
		fields[i], _ = f.(string) // nil: a hash an older writer left without the first sample
	}
	if s, ok := sampleOf(fields); ok {
		p.RatePerS, p.ETA = task.Speed(s, task.Sample{Current: current, At: now}, total)
	}
	return b.publish(ctx, Notice{Kind: NoticeProgress, TaskNo: taskNo, Owner: owner, Progress: p, Counts: &counts})
}

// Changed announces that a task's status changed (after the change committed).
func (b *ProgressBoard) Changed(ctx context.Context, taskNo, owner string) error {
	return b.publish(ctx, Notice{Kind: NoticeChanged, TaskNo: taskNo, Owner: owner})
}

// publish queues n for the publisher (see ProgressBoard).
func (b *ProgressBoard) publish(_ context.Context, n Notice) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	if err := b.notices.Offer(&outNotice{body: body}); err != nil {
		return fmt.Errorf("live notice dropped (streams catch up at their next poll): %w", err)
	}
	return nil
}

// publishBatch sends queued notices as one pipeline of PUBLISHes.
func (b *ProgressBoard) publishBatch(_ context.Context, batch []*outNotice) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pipe := b.rdb.Pipeline()
	for _, n := range batch {
		pipe.Publish(ctx, EventsChannel, n.body)
	}
	pipe.Exec(ctx) //nolint:errcheck // best effort: streams also poll the outbox
}

// Close publishes the notices queued so far and stops the publisher, waiting at most
// closeWait for it: notices are best effort, and a stalled Redis must not hold up a shutdown.
func (b *ProgressBoard) Close() { within(closeWait, b.notices.Close) }

// closeWait bounds how long Close waits for queued notices to be published.
const closeWait = 2 * time.Second

// Get returns the live progress, and false when Redis has none (finished, or Redis lost it).
func (b *ProgressBoard) Get(ctx context.Context, taskNo string) (task.Live, bool, error) {
	m, err := b.rdb.HGetAll(ctx, progressKey(taskNo)).Result()
	if err != nil || len(m) == 0 {
		return task.Live{}, false, err
	}
	return liveOf(m), true, nil
}

// GetMany returns the live progress of the tasks that have some, by task number, in one
// round trip (a page of the task list).
func (b *ProgressBoard) GetMany(ctx context.Context, taskNos []string) (map[string]task.Live, error) {
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(taskNos))
	for i, no := range taskNos {
		cmds[i] = pipe.HGetAll(ctx, progressKey(no))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]task.Live, len(taskNos))
	for i, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out[taskNos[i]] = liveOf(m)
		}
	}
	return out, nil
}

// liveOf reads a progress hash.
func liveOf(m map[string]string) task.Live {
	var l task.Live
	l.Progress.Current, _ = strconv.ParseInt(m["current"], 10, 64)
	l.Progress.Total, _ = strconv.ParseInt(m["total"], 10, 64)
	l.Progress.Percent, _ = strconv.Atoi(m["percent"])
	l.Progress.UpdatedAt, _ = time.Parse(time.RFC3339Nano, m["updated_at"])
	if _, ok := m["rows_total"]; ok {
		var c task.Counts
		c.Total, _ = strconv.ParseInt(m["rows_total"], 10, 64)
		c.Success, _ = strconv.ParseInt(m["rows_success"], 10, 64)
		c.Failed, _ = strconv.ParseInt(m["rows_failed"], 10, 64)
		l.Counts = &c
	}
	if first, ok := sampleOf([]string{m["first_current"], m["first_at"]}); ok {
		l.First = &first
	}
	return l
}

// sampleOf reads the first sample kept in a progress hash: [first_current, first_at].
func sampleOf(fields []string) (task.Sample, bool) {
	if len(fields) != 2 {
		return task.Sample{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, fields[1])
	if err != nil {
		return task.Sample{}, false
	}
	current, err := strconv.ParseInt(fields[0], 10, 64)
	return task.Sample{Current: current, At: at}, err == nil
}

// Clear removes the hash when the task reaches a terminal state or starts a new generation.
func (b *ProgressBoard) Clear(ctx context.Context, taskNo string) error {
	return b.rdb.Del(ctx, progressKey(taskNo)).Err()
}
