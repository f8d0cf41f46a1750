package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/task"
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
	// Search finds tasks by what a person remembers of them: the start of the task's id, or
	// any part of its title or of the uploaded file's name, letters of either case (see
	// searchCondition). Blank: no search.
	Search string
	// Sort is the listing's order; "" is SortNewest.
	Sort Sort
	// After continues a listing: tasks past this position of the same sort.
	After *Cursor
	Limit int
}

// Sort is the order of a task listing. A key on its own lists the largest first (newest,
// longest, most rejected rows); with a leading "-" the smallest first. Ties go by id in the
// same direction, so each order is total and a cursor continues it exactly.
type Sort string

// The sorts of a task listing.
const (
	SortNewest       Sort = "created"   // newest first (the default)
	SortOldest       Sort = "-created"  // oldest first
	SortLongest      Sort = "duration"  // longest run (finished − started) first; tasks without one last
	SortShortest     Sort = "-duration" // shortest run first; tasks without one last
	SortMostFailed   Sort = "failed"    // most rejected rows first
	SortFewestFailed Sort = "-failed"   // fewest rejected rows first
)

// Sorts lists every sort, the default first.
func Sorts() []Sort {
	return []Sort{SortNewest, SortOldest, SortLongest, SortShortest, SortMostFailed, SortFewestFailed}
}

// Valid reports whether s is a sort ("" counts as the default).
func (s Sort) Valid() bool { return s == "" || slices.Contains(Sorts(), s) }

// runMicros is a task's run time in microseconds, NULL when it has none (not finished, or
// finished without starting: cancelled while it waited). A stepped clock cannot make it
// negative.
const runMicros = `CASE WHEN finished_at IS NULL OR started_at IS NULL THEN NULL
		ELSE greatest((extract(epoch FROM finished_at - started_at) * 1000000)::bigint, 0) END`

// order is how a sort orders the rows: its key as SQL (never NULL, so a row comparison
// continues it), the key's value as the cursor carries it, and the direction.
func (s Sort) order() (key, cursorKey string, desc bool) {
	switch s {
	case SortOldest:
		return "created_at", createdMicros, false
	case SortLongest:
		// No run time sorts below every real one: last.
		return "coalesce(" + runMicros + ", -1)", "coalesce(" + runMicros + ", -1)", true
	case SortShortest:
		return "coalesce(" + runMicros + ", 9223372036854775807)", "coalesce(" + runMicros + ", 9223372036854775807)", false
	case SortMostFailed:
		return "failed_count", "failed_count", true
	case SortFewestFailed:
		return "failed_count", "failed_count", false
	default:
		return "created_at", createdMicros, true
	}
}

// createdMicros is created_at in Unix microseconds, the created sorts' cursor key: exact,
// as Postgres keeps microseconds.
const createdMicros = `(extract(epoch FROM created_at) * 1000000)::bigint`

// Cursor is a position in a listing: the sort it continues, the last task's key in that
// sort (created_at in Unix microseconds, a run time in microseconds, rejected rows) and the
// last task's id.
type Cursor struct {
	Sort Sort
	Key  int64
	ID   int64
}

// ErrCursorSort is a cursor of one sort given to continue another.
var ErrCursorSort = errors.New("the cursor continues another sort")

// List returns tasks in f's order, and the cursor of the next page when there is one.
func (s *Tasks) List(ctx context.Context, f ListFilter, scope Scope) ([]Task, *Cursor, error) {
	query, args, limit, err := listQuery(f, scope)
	if err != nil {
		return nil, nil, fmt.Errorf("list tasks: %w", err)
	}
	var rows []struct {
		Task
		SortKey int64 `bun:"sort_key"`
	}
	if err := pg.All(ctx, s.db, s.db.DB, &rows, query, args...); err != nil {
		return nil, nil, fmt.Errorf("list tasks: %w", err)
	}
	var next *Cursor
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = &Cursor{Sort: cmp.Or(f.Sort, SortNewest), Key: last.SortKey, ID: last.ID}
	}
	tasks := make([]Task, len(rows))
	for i := range rows {
		tasks[i] = rows[i].Task
	}
	return tasks, next, nil
}

// listQuery is List's statement: one more row than the page holds, so that List knows
// whether another page follows, each with its key in the sort (sort_key).
func listQuery(f ListFilter, scope Scope) (query string, args []any, limit int, err error) {
	limit = f.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	sort := cmp.Or(f.Sort, SortNewest)
	if !sort.Valid() {
		return "", nil, 0, fmt.Errorf("unknown sort %q", sort)
	}
	key, cursorKey, desc := sort.order()
	dir, past := " ASC", ">"
	if desc {
		dir, past = " DESC", "<"
	}
	c := taskConditions(f, scope)
	if a := f.After; a != nil {
		if cmp.Or(a.Sort, SortNewest) != sort {
			return "", nil, 0, ErrCursorSort
		}
		var at string
		if key == "created_at" {
			// A bound time, so the (owner,) created_at, id indexes serve the condition.
			at = c.Arg(time.UnixMicro(a.Key).UTC()) + "::timestamptz"
		} else {
			at = c.Arg(a.Key) + "::bigint"
		}
		c.And("(" + key + ", id) " + past + " (" + at + ", " + c.Arg(a.ID) + "::bigint)")
	}
	query = `SELECT ` + taskColumns + `, ` + cursorKey + ` AS sort_key FROM tasks` + c.Where() +
		` ORDER BY ` + key + dir + `, id` + dir + ` LIMIT ` + c.Arg(limit+1)
	return query, c.Args, limit, nil
}

// StatusCounts counts the tasks f and scope select, per status, as if f named no status:
// a listing's tabs show how many each status would list. Statuses without a task are absent.
func (s *Tasks) StatusCounts(ctx context.Context, f ListFilter, scope Scope) (map[Status]int64, error) {
	query, args := countQuery(f, scope)
	var rows []struct {
		Status Status `bun:"status"`
		N      int64  `bun:"n"`
	}
	if err := pg.All(ctx, s.db, s.db.DB, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("count tasks per status: %w", err)
	}
	out := make(map[Status]int64, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// countQuery is StatusCounts' statement: one grouped count.
func countQuery(f ListFilter, scope Scope) (query string, args []any) {
	f.Statuses = nil
	c := taskConditions(f, scope)
	return `SELECT status, count(*) AS n FROM tasks` + c.Where() + ` GROUP BY status`, c.Args
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
	searchCondition(c, f.Search)
	return c
}

// searchCondition adds the search rule: the term (trimmed) starts the task's id, or is part
// of its title or of the uploaded file's name (params.filename, which an import keeps as
// uploaded), regardless of case; or it is the id of one of the task's jobs as the ops
// console shows it (task.JobID: <task id>-a<attempt>, any attempt). The term is matched as
// written: % and _ in it are themselves, not LIKE's wildcards.
func searchCondition(c *pg.Conditions, term string) {
	term = strings.TrimSpace(term)
	if term == "" {
		return
	}
	prefix := c.Arg(strings.ToLower(term))
	part := c.Arg("%" + pg.EscapeLike(term) + "%")
	job := ""
	if taskNo, ok := task.OfJob(term); ok {
		job = " OR lower(task_no) = " + c.Arg(strings.ToLower(taskNo)) + "::text"
	}
	c.And("(starts_with(lower(task_no), " + prefix + "::text) OR title ILIKE " + part + "::text ESCAPE '\\' OR (params ->> 'filename') ILIKE " + part + "::text ESCAPE '\\'" + job + ")")
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
	return pg.List[Run](ctx, s.db, fmt.Sprintf("list runs of task %d", taskID),
		`SELECT `+runColumns+` FROM task_runs WHERE task_id = $1 ORDER BY attempt`, taskID)
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
	return pg.List[OwnerBacklog](ctx, s.db, "count waiting tasks per owner", `
		SELECT queue, owner, waiting FROM (
			SELECT queue, owner, count(*) AS waiting, row_number() OVER (PARTITION BY queue ORDER BY count(*) DESC) AS rank
			FROM tasks WHERE status IN ('PENDING', 'RETRY_WAIT') GROUP BY queue, owner) r
		WHERE rank <= $1 ORDER BY queue, waiting DESC`, limit)
}
