package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// Get returns a task by its public number, if scope may see it.
func (s *Tasks) Get(ctx context.Context, taskNo string, scope Scope) (*Task, error) {
	return pg.Get[Task](ctx, s.db, ErrNotFound, fmt.Sprintf("get task %s", taskNo),
		`SELECT `+taskColumns+` FROM tasks WHERE task_no = $1 AND ($2 OR owner = $3)`,
		taskNo, scope.Admin, scope.Owner)
}

// GetByID returns a task by its internal id.
func (s *Tasks) GetByID(ctx context.Context, id int64) (*Task, error) {
	return pg.Get[Task](ctx, s.db, ErrNotFound, fmt.Sprintf("get task %d", id),
		`SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id)
}

// ListFilter narrows a task listing.
type ListFilter struct {
	Statuses    []Status
	Types       []string
	Owner       string // admin only; users are always limited to themselves
	CreatedFrom *time.Time
	CreatedTo   *time.Time
	// After continues a listing: tasks strictly older than this (created_at, id) position.
	After *Cursor
	Limit int
}

// Cursor is a position in the newest-first listing.
type Cursor struct {
	CreatedAt time.Time
	ID        int64
}

// List returns tasks newest first, and the cursor of the next page when there is one.
func (s *Tasks) List(ctx context.Context, f ListFilter, scope Scope) ([]Task, *Cursor, error) {
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	c := taskConditions(f, scope)
	if f.After != nil {
		c.And("(created_at, id) < (" + c.Arg(f.After.CreatedAt) + "::timestamptz, " + c.Arg(f.After.ID) + "::bigint)")
	}
	var tasks []Task
	err := pg.All(ctx, s.db, s.db.DB, &tasks, `SELECT `+taskColumns+` FROM tasks`+c.Where()+
		` ORDER BY created_at DESC, id DESC LIMIT `+c.Arg(limit+1), c.Args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list tasks: %w", err)
	}
	var next *Cursor
	if len(tasks) > limit {
		tasks = tasks[:limit]
		last := tasks[limit-1]
		next = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return tasks, next, nil
}

// taskConditions are f and scope's conditions over tasks. The task list API and the task
// export share them, so both see exactly the same rows.
func taskConditions(f ListFilter, scope Scope) *pg.Conditions {
	c := &pg.Conditions{}
	switch {
	case !scope.Admin:
		c.And("owner = " + c.Arg(scope.Owner))
	case f.Owner != "":
		c.And("owner = " + c.Arg(f.Owner))
	}
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			statuses[i] = string(st)
		}
		c.And("status = ANY(" + c.Arg(statuses) + "::text[])")
	}
	if len(f.Types) > 0 {
		c.And("type = ANY(" + c.Arg(f.Types) + "::text[])")
	}
	if f.CreatedFrom != nil {
		c.And("created_at >= " + c.Arg(*f.CreatedFrom) + "::timestamptz")
	}
	if f.CreatedTo != nil {
		c.And("created_at < " + c.Arg(*f.CreatedTo) + "::timestamptz")
	}
	return c
}

// CountTasks counts the tasks f and scope select, inside tx (an export's snapshot).
func CountTasks(ctx context.Context, tx bun.Tx, f ListFilter, scope Scope) (int64, error) {
	c := taskConditions(f, scope)
	var n int64
	err := tx.Tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks`+c.Where(), pg.Cached(c.Args)...).Scan(&n)
	return n, err
}

// TaskPage returns up to limit tasks that f and scope select with id > after, in id order,
// inside tx (an export's snapshot).
func TaskPage(ctx context.Context, tx bun.Tx, db *bun.DB, f ListFilter, scope Scope, after int64, limit int) ([]Task, error) {
	c := taskConditions(f, scope)
	c.And("id > " + c.Arg(after) + "::bigint")
	var tasks []Task
	err := pg.All(ctx, db, tx.Tx, &tasks, `SELECT `+taskColumns+` FROM tasks`+c.Where()+` ORDER BY id LIMIT `+c.Arg(limit), c.Args...)
	return tasks, err
}

// Runs returns every attempt of a task, oldest first.
func (s *Tasks) Runs(ctx context.Context, taskID int64) ([]Run, error) {
	var runs []Run
	if err := pg.All(ctx, s.db, s.db.DB, &runs, `SELECT `+runColumns+` FROM task_runs WHERE task_id = $1 ORDER BY attempt`, taskID); err != nil {
		return nil, fmt.Errorf("list runs of task %d: %w", taskID, err)
	}
	return runs, nil
}

// RecentLogs returns the newest n log lines of a task, oldest first.
func (s *Tasks) RecentLogs(ctx context.Context, taskID int64, n int) ([]LogEntry, error) {
	var logs []LogEntry
	err := pg.All(ctx, s.db, s.db.DB, &logs, `SELECT `+logColumns+` FROM task_logs WHERE task_id = $1 ORDER BY id DESC LIMIT $2`, taskID, n)
	if err != nil {
		return nil, fmt.Errorf("list logs of task %d: %w", taskID, err)
	}
	for i, j := 0, len(logs)-1; i < j; i, j = i+1, j-1 {
		logs[i], logs[j] = logs[j], logs[i]
	}
	return logs, nil
}

// Waiting counts a queue's PENDING and RETRY_WAIT tasks, stopping at upTo: admission control
// only needs to know whether the backlog is over its limit.
func (s *Tasks) Waiting(ctx context.Context, queue string, upTo int) (int, error) {
	var n int
	err := pg.One(ctx, s.db, s.db.DB, &n,
		`SELECT count(*) FROM (SELECT 1 FROM tasks WHERE queue = $1 AND status IN ('PENDING', 'RETRY_WAIT') LIMIT $2) w`,
		queue, upTo)
	if err != nil {
		return 0, fmt.Errorf("count waiting tasks in %s: %w", queue, err)
	}
	return n, nil
}

// FindByKey returns the owner's task of a type with the given idempotency key.
func (s *Tasks) FindByKey(ctx context.Context, owner, taskType, bizKey string) (*Task, error) {
	return pg.Get[Task](ctx, s.db, ErrNotFound, "find task by key",
		`SELECT `+taskColumns+` FROM tasks WHERE owner = $1 AND type = $2 AND biz_key = $3`,
		owner, taskType, bizKey)
}

// WaitingByQueue counts PENDING and RETRY_WAIT tasks per queue (metrics, backlog alerts).
func (s *Tasks) WaitingByQueue(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Queue string `bun:"queue"`
		N     int    `bun:"n"`
	}
	if err := pg.All(ctx, s.db, s.db.DB, &rows, sqlWaitingByQueue); err != nil {
		return nil, fmt.Errorf("count waiting tasks: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Queue] = r.N
	}
	return out, nil
}

// OwnerWaiting counts an owner's PENDING and RETRY_WAIT tasks in a queue, stopping at upTo.
func (s *Tasks) OwnerWaiting(ctx context.Context, queue, owner string, upTo int) (int, error) {
	var n int
	err := pg.One(ctx, s.db, s.db.DB, &n,
		`SELECT count(*) FROM (SELECT 1 FROM tasks WHERE queue = $1 AND owner = $2 AND status IN ('PENDING', 'RETRY_WAIT') LIMIT $3) w`,
		queue, owner, upTo)
	if err != nil {
		return 0, fmt.Errorf("count %s's waiting tasks in %s: %w", owner, queue, err)
	}
	return n, nil
}

// OwnerBacklog is one owner's waiting tasks in a queue.
type OwnerBacklog struct {
	Queue   string `bun:"queue"`
	Owner   string `bun:"owner"`
	Waiting int    `bun:"waiting"`
}

// TopWaitingOwners returns, per queue, the limit owners with the most waiting tasks (metrics).
func (s *Tasks) TopWaitingOwners(ctx context.Context, limit int) ([]OwnerBacklog, error) {
	var out []OwnerBacklog
	err := pg.All(ctx, s.db, s.db.DB, &out, `
		SELECT queue, owner, waiting FROM (
			SELECT queue, owner, count(*) AS waiting, row_number() OVER (PARTITION BY queue ORDER BY count(*) DESC) AS rank
			FROM tasks WHERE status IN ('PENDING', 'RETRY_WAIT') GROUP BY queue, owner) r
		WHERE rank <= $1 ORDER BY queue, waiting DESC`, limit)
	if err != nil {
		return nil, fmt.Errorf("count waiting tasks per owner: %w", err)
	}
	return out, nil
}
