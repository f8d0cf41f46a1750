package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Get returns a task by its public number, if scope may see it.
func (s *Store) Get(ctx context.Context, taskNo string, scope Scope) (*Task, error) {
	t := new(Task)
	q := s.db.NewSelect().Model(t).Where("task_no = ?", taskNo)
	if !scope.Admin {
		q = q.Where("owner = ?", scope.Owner)
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("get task %s: %w", taskNo, err)
	}
	return t, nil
}

// GetByID returns a task by its internal id.
func (s *Store) GetByID(ctx context.Context, id int64) (*Task, error) {
	t := new(Task)
	if err := s.db.NewSelect().Model(t).Where("id = ?", id).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("get task %d: %w", id, err)
	}
	return t, nil
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
func (s *Store) List(ctx context.Context, f ListFilter, scope Scope) ([]Task, *Cursor, error) {
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	var tasks []Task
	q := s.db.NewSelect().Model(&tasks).OrderExpr("created_at DESC, id DESC").Limit(int64(limit + 1))
	ApplyTaskFilter(q, f, scope)
	if err := q.Scan(ctx); err != nil {
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

// ApplyTaskFilter adds f and scope's conditions to a query over tasks. The task list API and
// the task export share it, so both see exactly the same rows.
func ApplyTaskFilter(q *bun.SelectQuery, f ListFilter, scope Scope) *bun.SelectQuery {
	switch {
	case !scope.Admin:
		q = q.Where("owner = ?", scope.Owner)
	case f.Owner != "":
		q = q.Where("owner = ?", f.Owner)
	}
	if len(f.Statuses) > 0 {
		q = q.Where("status IN (?)", bun.In(f.Statuses))
	}
	if len(f.Types) > 0 {
		q = q.Where("type IN (?)", bun.In(f.Types))
	}
	if f.CreatedFrom != nil {
		q = q.Where("created_at >= ?", *f.CreatedFrom)
	}
	if f.CreatedTo != nil {
		q = q.Where("created_at < ?", *f.CreatedTo)
	}
	if f.After != nil {
		q = q.Where("(created_at, id) < (?, ?)", f.After.CreatedAt, f.After.ID)
	}
	return q
}

// Runs returns every attempt of a task, oldest first.
func (s *Store) Runs(ctx context.Context, taskID int64) ([]Run, error) {
	var runs []Run
	if err := s.db.NewSelect().Model(&runs).Where("task_id = ?", taskID).Order("attempt").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list runs of task %d: %w", taskID, err)
	}
	return runs, nil
}

// RecentLogs returns the newest n log lines of a task, oldest first.
func (s *Store) RecentLogs(ctx context.Context, taskID int64, n int) ([]LogEntry, error) {
	var logs []LogEntry
	err := s.db.NewSelect().Model(&logs).Where("task_id = ?", taskID).Order("id DESC").Limit(int64(n)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list logs of task %d: %w", taskID, err)
	}
	for i, j := 0, len(logs)-1; i < j; i, j = i+1, j-1 {
		logs[i], logs[j] = logs[j], logs[i]
	}
	return logs, nil
}

// AppendLog adds a line to a task's narrative.
func (s *Store) AppendLog(ctx context.Context, taskID int64, attempt int, level, message string) error {
	_, err := s.db.NewInsert().Model(&LogEntry{TaskID: taskID, Attempt: attempt, Level: level, Message: message}).Exec(ctx)
	if err != nil {
		return fmt.Errorf("append log to task %d: %w", taskID, err)
	}
	return nil
}

// Waiting counts a queue's PENDING and RETRY_WAIT tasks, stopping at upTo: admission control
// only needs to know whether the backlog is over its limit.
func (s *Store) Waiting(ctx context.Context, queue string, upTo int) (int, error) {
	var n int
	err := s.db.NewRaw(`SELECT count(*) FROM (SELECT 1 FROM tasks WHERE queue = ? AND status IN ('PENDING', 'RETRY_WAIT') LIMIT ?) w`,
		queue, upTo).Scan(ctx, &n)
	if err != nil {
		return 0, fmt.Errorf("count waiting tasks in %s: %w", queue, err)
	}
	return n, nil
}

// FindByKey returns the owner's task of a type with the given idempotency key.
func (s *Store) FindByKey(ctx context.Context, owner, taskType, bizKey string) (*Task, error) {
	t := new(Task)
	err := s.db.NewSelect().Model(t).Where("owner = ? AND type = ? AND biz_key = ?", owner, taskType, bizKey).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find task by key: %w", err)
	}
	return t, nil
}

// WaitingByQueue counts PENDING and RETRY_WAIT tasks per queue (metrics, backlog alerts).
func (s *Store) WaitingByQueue(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Queue string `bun:"queue"`
		N     int    `bun:"n"`
	}
	if err := s.db.NewRaw(sqlWaitingByQueue).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("count waiting tasks: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Queue] = r.N
	}
	return out, nil
}
