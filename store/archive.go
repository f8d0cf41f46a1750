package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
	"github.com/taskcenter/taskcenter/store/stats"
)

// This file is the archive: retention moves finished tasks into archive tables and daily
// aggregates instead of deleting them, lookups by id fall back to it, and the stats
// (store/stats) read the aggregates.

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
		if err := pg.All(ctx, s.db, tx.Tx, &locked, `SELECT id FROM tasks WHERE id = ANY($1::bigint[]) AND status IN `+task.TerminalSQL+`
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
			        sum(failed_count), ` + stats.HistogramAgg() + `
			 FROM (SELECT *, ` + stats.BucketCase() + ` AS b FROM (SELECT *, EXTRACT(EPOCH FROM finished_at - COALESCE(started_at, created_at)) AS d
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

// Stats aggregates finished tasks, archived and live (store/stats).
func (s *Archive) Stats(ctx context.Context, f stats.Filter, scope Scope) ([]stats.Row, error) {
	return stats.Read(ctx, s.db, f, scope)
}
