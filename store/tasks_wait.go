package store

import (
	"context"
	"fmt"
	"time"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
)

// Line is where a waiting task stands in its queue, for the figures a person waits with
// (internal/task WaitOf).
type Line struct {
	// Ahead is how many waiting tasks of the same queue a worker would claim first, at most
	// MaxAhead.
	Ahead int64 `bun:"ahead"`
	// Finished is how many of the queue's tasks that had started ended in the window.
	Finished int64 `bun:"finished"`
}

// MaxAhead bounds the count of tasks ahead, so a huge backlog costs a bounded read.
const MaxAhead = 10000

// laneRank is a task's lane in the order workers take from them (jobs.Lanes): resumed work,
// priority 1-3, 4-6, 7-9.
const laneRank = `CASE WHEN %[1]s.attempt > 0 THEN 0 WHEN %[1]s.priority BETWEEN 1 AND 3 THEN 1 WHEN %[1]s.priority >= 7 THEN 3 ELSE 2 END`

// linesQuery counts, for each waiting task, the claimable tasks of its queue ahead of it: in an
// earlier lane, or in the same lane and created before it. It reads the lanes as strict
// (asynq's weighted pick also serves later lanes, more slowly) and leaves out the per-owner
// fair-share cap, so the count is an approximation of the claim's order, not a promise. The
// queue's finished count is read once per queue, not once per task.
var linesQuery = `
	WITH waiting AS (SELECT * FROM tasks WHERE id = ANY($1::bigint[]) AND status IN ('PENDING', 'RETRY_WAIT')),
	finished AS (SELECT f.queue, count(*) AS n FROM tasks f
	     WHERE f.queue IN (SELECT queue FROM waiting) AND f.status IN ` + task.TerminalSQL + ` AND f.started_at IS NOT NULL
	       AND f.finished_at > now() - make_interval(secs => $3)
	     GROUP BY f.queue)
	SELECT t.id,
	  (SELECT count(*) FROM (SELECT 1 FROM tasks w
	     WHERE w.queue = t.queue AND w.id <> t.id
	       AND (w.status = 'PENDING' OR (w.status = 'RETRY_WAIT' AND w.next_retry_at <= now()))
	       AND (` + fmt.Sprintf(laneRank, "w") + `, w.created_at, w.id) < (` + fmt.Sprintf(laneRank, "t") + `, t.created_at, t.id)
	     LIMIT $2) a) AS ahead,
	  coalesce(finished.n, 0) AS finished
	FROM waiting t LEFT JOIN finished ON finished.queue = t.queue`

// Lines answers where each of the waiting tasks ids stands in its queue, and how many tasks
// its queue finished in the last window. Tasks that are not waiting are left out.
func (s *Tasks) Lines(ctx context.Context, ids []int64, window time.Duration) (map[int64]Line, error) {
	out := map[int64]Line{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID int64 `bun:"id"`
		Line
	}
	if err := pg.All(ctx, s.db, s.db.DB, &rows, linesQuery, ids, MaxAhead, window.Seconds()); err != nil {
		return nil, fmt.Errorf("read queue lines: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.Line
	}
	return out, nil
}
