package store

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"
)

// Every statement in this package is written in Postgres' own $n form and sent with its
// values as bound parameters: a value can never change the text of a query, whatever bytes it
// holds (NUL, quotes, '?', '$1', '::', backslashes). bun is used to open the pool, run
// migrations and scan rows into the models, never to format values into SQL.
//
// Statements name their columns. A rolling deploy that adds a column (the new binary migrates
// at start) must not break the replicas still running the old binary: they keep reading and
// writing the columns they know. TestColumnListsMatchModels keeps the lists and the models in
// step.

// Column lists of the models, in model order.
const (
	taskColumns = `id, task_no, type, title, owner, queue, priority, biz_key, status, params, request_id, progress_current,
		progress_total, total_count, success_count, failed_count, checkpoint, attempt, retry_count, max_retry,
		next_retry_at, heartbeat_at, worker, cancel_requested, error_code, error_message, result, result_expires_at,
		timeout_seconds, retry_base_ms, max_runtime_ms, stall_after_ms, enqueued_at, alert_due_at, alerted_at, created_at, started_at,
		finished_at, updated_at`
	runColumns     = `id, task_id, attempt, trigger, worker, status, error, started_at, finished_at`
	logColumns     = `id, task_id, attempt, level, message, created_at`
	itemColumns    = `id, task_id, row_no, field, message, raw, created_at`
	roundColumns   = `slot, worker, started_at, finished_at, report`
	eventColumns   = `id, task_id, task_no, owner, task_type, event, status, attempt, actor, created_at`
	terminalStates = `('SUCCESS', 'PARTIAL_SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED')`
)

// querier runs statements: the pool (*sql.DB) or a transaction (*sql.Tx).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// cached asks pgx to prepare the statement once per connection and reuse it. Every statement
// here is a fixed text (values are parameters), so the cache holds a bounded set.
func cached(args []any) []any {
	return append([]any{pgx.QueryExecModeCacheStatement}, args...)
}

// one runs query and scans its first row into dest (a model or scalar pointer); no row is
// sql.ErrNoRows. Further rows are read and dropped, so a CTE's side effects all complete.
func one(ctx context.Context, db *bun.DB, q querier, dest any, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, cached(args)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := db.ScanRow(ctx, rows, dest); err != nil {
		return err
	}
	for rows.Next() {
	}
	return rows.Err()
}

// all runs query and scans every row into dest, a pointer to a slice of models or scalars.
func all(ctx context.Context, db *bun.DB, q querier, dest any, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, cached(args)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return db.ScanRows(ctx, rows, dest)
}

// exec runs a statement and returns the rows it affected.
func exec(ctx context.Context, q querier, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, query, cached(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// conditions builds a WHERE clause whose values are numbered parameters.
type conditions struct {
	terms []string
	args  []any
}

// arg adds a parameter and returns its placeholder.
func (c *conditions) arg(v any) string {
	c.args = append(c.args, v)
	return "$" + strconv.Itoa(len(c.args))
}

// and adds a condition (built with arg).
func (c *conditions) and(term string) { c.terms = append(c.terms, term) }

// where is the clause, or "" when there is no condition.
func (c *conditions) where() string {
	if len(c.terms) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.terms, " AND ")
}
