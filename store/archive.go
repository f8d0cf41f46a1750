package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// This file is the archive: retention moves finished tasks into archive tables and daily
// aggregates instead of deleting them, lookups by id fall back to it, and the stats API reads
// the aggregates.

// DurationBuckets are the upper bounds, in seconds, of the duration histogram kept per day;
// the last bucket holds everything longer.
var DurationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600}

// bucketCase is the SQL expression that turns a duration in seconds (d) into a 1-based bucket.
func bucketCase() string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, ub := range DurationBuckets {
		fmt.Fprintf(&b, " WHEN d <= %g THEN %d", ub, i+1)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(DurationBuckets)+1)
	return b.String()
}

// histogramAgg is the aggregate that counts a group's rows per bucket b: an array with one
// element per bucket.
func histogramAgg() string {
	parts := make([]string, len(DurationBuckets)+1)
	for i := range parts {
		parts[i] = fmt.Sprintf("count(*) FILTER (WHERE b = %d)", i+1)
	}
	return "ARRAY[" + strings.Join(parts, ", ") + "]::bigint[]"
}

// ArchiveTasks moves terminal tasks, with their runs, logs and rejected rows, into the
// archive and folds them into the daily aggregates, in one transaction. It returns how many
// tasks it moved; a task that is not terminal (retried meanwhile) stays.
func (s *Archive) ArchiveTasks(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var moved int64
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var locked []int64
		if err := pg.All(ctx, s.db, tx.Tx, &locked, `SELECT id FROM tasks WHERE id = ANY($1::bigint[]) AND status IN `+terminalStates+`
			ORDER BY id FOR UPDATE`, ids); err != nil {
			return err
		}
		if len(locked) == 0 {
			return nil
		}
		steps := []string{
			`INSERT INTO tasks_archive (` + taskColumns + `) SELECT ` + taskColumns + ` FROM tasks WHERE id = ANY($1::bigint[])`,
			// The files went before the archive (see cleanup): the result says so, as an
			// expired one does.
			`UPDATE tasks_archive SET result = result || '{"expired": true}'::jsonb
			 WHERE id = ANY($1::bigint[]) AND jsonb_typeof(result) = 'object'`,
			`INSERT INTO task_runs_archive (` + runColumns + `) SELECT ` + runColumns + ` FROM task_runs WHERE task_id = ANY($1::bigint[])`,
			`INSERT INTO task_logs_archive (` + logColumns + `) SELECT ` + logColumns + ` FROM task_logs WHERE task_id = ANY($1::bigint[])`,
			`INSERT INTO task_items_archive (` + itemColumns + `) SELECT ` + itemColumns + ` FROM task_items WHERE task_id = ANY($1::bigint[])`,
			`INSERT INTO task_stats_daily AS s (day, type, status, owner, tasks, rows_total, rows_success, rows_failed, durations)
			 SELECT (finished_at AT TIME ZONE 'UTC')::date, type, status, owner, count(*), sum(total_count), sum(success_count),
			        sum(failed_count), ` + histogramAgg() + `
			 FROM (SELECT *, ` + bucketCase() + ` AS b FROM (SELECT *, EXTRACT(EPOCH FROM finished_at - COALESCE(started_at, created_at)) AS d
			       FROM tasks WHERE id = ANY($1::bigint[])) x) y
			 GROUP BY 1, type, status, owner
			 ON CONFLICT (day, type, status, owner) DO UPDATE SET tasks = s.tasks + EXCLUDED.tasks,
			    rows_total = s.rows_total + EXCLUDED.rows_total, rows_success = s.rows_success + EXCLUDED.rows_success,
			    rows_failed = s.rows_failed + EXCLUDED.rows_failed,
			    durations = ARRAY(SELECT a + b FROM unnest(s.durations, EXCLUDED.durations) AS u(a, b))`,
		}
		for _, q := range steps {
			if _, err := pg.Exec(ctx, tx.Tx, q, locked); err != nil {
				return fmt.Errorf("archive: %w", err)
			}
		}
		n, err := pg.Exec(ctx, tx.Tx, `DELETE FROM tasks WHERE id = ANY($1::bigint[])`, locked)
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		moved = n
		// Runs and events have no foreign key (no RI check on the hot path; see the migration
		// lighter_task_events): they go with their task here. Logs and rejected rows cascade.
		if err := deleteTaskRows(ctx, tx, locked, "task_runs", "task_events"); err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("archive tasks: %w", err)
	}
	return int(moved), nil
}

// PurgeArchive deletes archived tasks (with their runs, logs and rejected rows) archived
// longer than age ago, at most limit of them. The daily aggregates stay.
func (s *Archive) PurgeArchive(ctx context.Context, age time.Duration, limit int) (int, error) {
	var n int64
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var ids []int64
		if err := pg.All(ctx, s.db, tx.Tx, &ids, `SELECT id FROM tasks_archive WHERE archived_at < now() - make_interval(secs => $1)
			ORDER BY archived_at LIMIT $2`, age.Seconds(), limit); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if err := deleteTaskRows(ctx, tx, ids, "task_runs_archive", "task_logs_archive", "task_items_archive"); err != nil {
			return err
		}
		var err error
		n, err = pg.Exec(ctx, tx.Tx, `DELETE FROM tasks_archive WHERE id = ANY($1::bigint[])`, ids)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	return int(n), nil
}

// deleteTaskRows deletes the rows of the tasks ids from each of tables (keyed by task_id).
func deleteTaskRows(ctx context.Context, tx bun.Tx, ids []int64, tables ...string) error {
	for _, table := range tables {
		if _, err := pg.Exec(ctx, tx.Tx, `DELETE FROM `+table+` WHERE task_id = ANY($1::bigint[])`, ids); err != nil {
			return err
		}
	}
	return nil
}

// GetArchived returns an archived task by its public number, if scope may see it.
func (s *Archive) GetArchived(ctx context.Context, taskNo string, scope Scope) (*Task, error) {
	return pg.Get[Task](ctx, s.db, ErrNotFound, fmt.Sprintf("get archived task %s", taskNo),
		`SELECT `+taskColumns+` FROM tasks_archive WHERE task_no = $1 AND ($2 OR owner = $3)`,
		taskNo, scope.Admin, scope.Owner)
}

// ArchivedRuns and ArchivedLogs are Runs and RecentLogs for an archived task.
func (s *Archive) ArchivedRuns(ctx context.Context, taskID int64) ([]Run, error) {
	var runs []Run
	err := pg.All(ctx, s.db, s.db.DB, &runs, `SELECT `+runColumns+` FROM task_runs_archive WHERE task_id = $1 ORDER BY attempt`, taskID)
	return runs, err
}

// ArchivedLogs returns the newest n log lines of an archived task, oldest first.
func (s *Archive) ArchivedLogs(ctx context.Context, taskID int64, n int) ([]LogEntry, error) {
	var logs []LogEntry
	err := pg.All(ctx, s.db, s.db.DB, &logs, `SELECT `+logColumns+` FROM task_logs_archive WHERE task_id = $1 ORDER BY id DESC LIMIT $2`, taskID, n)
	slices.Reverse(logs)
	return logs, err
}

// StatsFilter selects and groups finished tasks for Stats.
type StatsFilter struct {
	From, To time.Time // finished in [From, To); by UTC day
	// GroupBy lists the dimensions: any of day, type, status, owner (none: one total row).
	GroupBy []string
}

// StatsRow is one group of finished tasks.
type StatsRow struct {
	Day         string  `json:"day,omitempty"`
	Type        string  `json:"type,omitempty"`
	Status      string  `json:"status,omitempty"`
	Owner       string  `json:"owner,omitempty"`
	Tasks       int64   `json:"tasks"`
	RowsTotal   int64   `json:"rows_total"`
	RowsSuccess int64   `json:"rows_success"`
	RowsFailed  int64   `json:"rows_failed"`
	P50Seconds  float64 `json:"duration_p50_seconds"`
	P90Seconds  float64 `json:"duration_p90_seconds"`
	P99Seconds  float64 `json:"duration_p99_seconds"`
}

// StatsDimensions are the dimensions Stats groups by.
var StatsDimensions = []string{"day", "type", "status", "owner"}

// Stats aggregates finished tasks, archived and live, by day (UTC), type, status and owner.
// A user sees their own tasks; an admin everyone's. Durations are read from the histogram
// (DurationBuckets): a percentile is its bucket's upper bound.
func (s *Archive) Stats(ctx context.Context, f StatsFilter, scope Scope) ([]StatsRow, error) {
	for _, g := range f.GroupBy {
		if !slices.Contains(StatsDimensions, g) {
			return nil, fmt.Errorf("stats: unknown dimension %q", g)
		}
	}
	var raw []struct {
		Day         time.Time `bun:"day"`
		Type        string    `bun:"type"`
		Status      string    `bun:"status"`
		Owner       string    `bun:"owner"`
		Tasks       int64     `bun:"tasks"`
		RowsTotal   int64     `bun:"rows_total"`
		RowsSuccess int64     `bun:"rows_success"`
		RowsFailed  int64     `bun:"rows_failed"`
		Durations   []int64   `bun:"durations,array"`
	}
	err := pg.All(ctx, s.db, s.db.DB, &raw, `
		SELECT day, type, status, owner, tasks, rows_total, rows_success, rows_failed, durations FROM task_stats_daily
		WHERE day >= ($1::timestamptz AT TIME ZONE 'UTC')::date AND day < ($2::timestamptz AT TIME ZONE 'UTC')::date
		  AND ($3 OR owner = $4)
		UNION ALL
		SELECT (finished_at AT TIME ZONE 'UTC')::date, type, status, owner, 1, total_count, success_count, failed_count,
		       ARRAY(SELECT CASE WHEN i = b THEN 1 ELSE 0 END FROM generate_series(1, `+fmt.Sprint(len(DurationBuckets)+1)+`) i)::bigint[]
		FROM (SELECT *, `+bucketCase()+` AS b FROM (SELECT *, EXTRACT(EPOCH FROM finished_at - COALESCE(started_at, created_at)) AS d
		      FROM tasks WHERE status IN `+terminalStates+` AND finished_at >= $1 AND finished_at < $2 AND ($3 OR owner = $4)) x) y`,
		f.From, f.To, scope.Admin, scope.Owner)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	type group struct {
		row  StatsRow
		hist []int64
	}
	groups := map[string]*group{}
	for _, r := range raw {
		var key StatsRow
		for _, g := range f.GroupBy {
			switch g {
			case "day":
				key.Day = r.Day.Format(time.DateOnly)
			case "type":
				key.Type = r.Type
			case "status":
				key.Status = r.Status
			case "owner":
				key.Owner = r.Owner
			}
		}
		k := key.Day + "\x00" + key.Type + "\x00" + key.Status + "\x00" + key.Owner
		g := groups[k]
		if g == nil {
			g = &group{row: key, hist: make([]int64, len(DurationBuckets)+1)}
			groups[k] = g
		}
		g.row.Tasks += r.Tasks
		g.row.RowsTotal += r.RowsTotal
		g.row.RowsSuccess += r.RowsSuccess
		g.row.RowsFailed += r.RowsFailed
		for i := range min(len(r.Durations), len(g.hist)) {
			g.hist[i] += r.Durations[i]
		}
	}
	out := make([]StatsRow, 0, len(groups))
	for _, g := range groups {
		g.row.P50Seconds, g.row.P90Seconds, g.row.P99Seconds = percentile(g.hist, 0.5), percentile(g.hist, 0.9), percentile(g.hist, 0.99)
		out = append(out, g.row)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Day+a.Type+a.Status+a.Owner < b.Day+b.Type+b.Status+b.Owner
	})
	return out, nil
}

// percentile reads the p-th percentile from a histogram over DurationBuckets: the upper
// bound of the bucket it falls in (the last, open bucket reports its lower bound).
func percentile(hist []int64, p float64) float64 {
	var total int64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return 0
	}
	want := int64(float64(total)*p + 0.999999)
	var seen int64
	for i, n := range hist {
		seen += n
		if seen >= want {
			if i < len(DurationBuckets) {
				return DurationBuckets[i]
			}
			return DurationBuckets[len(DurationBuckets)-1]
		}
	}
	return DurationBuckets[len(DurationBuckets)-1]
}
