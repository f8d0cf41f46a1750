// Package pg is what package store and its subpackages (store/audit, store/customers,
// store/schedules, store/stats, store/tokens, store/uploads, store/webhooks)
// share about talking to Postgres: the statement runner (One, All, Exec, Collect for rows
// scanned by hand, and Prune for the retention deletes), the WHERE builder (Conditions), the classification of errors
// (IsUnavailable, IsTimeout, IsNoRows), a few column helpers, and Scope, the visibility every
// listing binds. It imports none of them, so each can import it.
//
// Every statement of the store is written in Postgres' own $n form and sent with its values
// as bound parameters: a value can never change the text of a query, whatever bytes it holds
// (NUL, quotes, '?', '$1', '::', backslashes). bun is used to open the pool, run migrations
// and scan rows into the models, never to format values into SQL.
//
// Statements name their columns. A rolling deploy that adds a column (the new binary migrates
// at start) must not break the replicas still running the old binary: they keep reading and
// writing the columns they know. Each package's TestColumnListsMatchModels keeps its lists
// and its models in step.
package pg

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"
)

// Scope is who is asking: a user sees their own tasks, an admin sees all. Statements bind it
// as ($n OR owner = $m).
type Scope struct {
	Owner string `json:"owner"`
	Admin bool   `json:"admin"`
}

// ListedOwner is the owner a listing keeps to (empty: every owner): a user's own rows, whatever
// they ask for; an admin's choice of owner, or everyone's when the admin names none.
func (s Scope) ListedOwner(owner string) string {
	if !s.Admin {
		return s.Owner
	}
	return owner
}

// Querier runs statements: the pool (*sql.DB) or a transaction (*sql.Tx).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Cached asks pgx to prepare the statement once per connection and reuse it. Every statement
// here is a fixed text (values are parameters), so the cache holds a bounded set.
func Cached(args []any) []any {
	return append([]any{pgx.QueryExecModeCacheStatement}, args...)
}

// One runs query and scans its first row into dest (a model or scalar pointer); no row is
// sql.ErrNoRows. Further rows are read and dropped, so a CTE's side effects all complete.
func One(ctx context.Context, db *bun.DB, q Querier, dest any, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, Cached(args)...)
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

// All runs query and scans every row into dest, a pointer to a slice of models or scalars.
func All(ctx context.Context, db *bun.DB, q Querier, dest any, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, Cached(args)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return db.ScanRows(ctx, rows, dest)
}

// Exec runs a statement and returns the rows it affected.
func Exec(ctx context.Context, q Querier, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, query, Cached(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Prune runs query, a DELETE of at most $2 rows older than $1 seconds (the retention steps
// of the cleanup round), and returns how many it deleted; what names the rows in its error.
func Prune(ctx context.Context, q Querier, what, query string, age time.Duration, limit int) (int, error) {
	n, err := Exec(ctx, q, query, age.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune %s: %w", what, err)
	}
	return int(n), nil
}

// Explain returns Postgres' plan for query with args, without running it. EXPLAIN with
// parameters needs their types from the extended protocol: the statement is described first.
func Explain(ctx context.Context, db *bun.DB, query string, args ...any) (string, error) {
	rows, err := db.DB.QueryContext(ctx, "EXPLAIN "+query, append([]any{pgx.QueryExecModeDescribeExec}, args...)...)
	if err != nil {
		return "", err
	}
	lines, err := Collect(rows, Scalar[string])
	return strings.Join(lines, "\n"), err
}

// Collect reads every row of rows (a query's answer; closed here) through scan, in order: for
// rows that are not a model, or where bun's reflection would show on a profile. scan is given
// the row's Scan, to read the columns into its own variables.
func Collect[T any](rows *sql.Rows, scan func(row func(dest ...any) error) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Scalar scans a row of one column into a T: Collect's scan for a list of values.
func Scalar[T any](row func(dest ...any) error) (v T, err error) {
	err = row(&v)
	return v, err
}

// Conditions builds a WHERE clause whose values are numbered parameters.
type Conditions struct {
	terms []string
	// Args are the values of the parameters, in order.
	Args []any
}

// Arg adds a parameter and returns its placeholder.
func (c *Conditions) Arg(v any) string {
	c.Args = append(c.Args, v)
	return "$" + strconv.Itoa(len(c.Args))
}

// And adds a condition (built with Arg).
func (c *Conditions) And(term string) { c.terms = append(c.terms, term) }

// Where is the clause, or "" when there is no condition.
func (c *Conditions) Where() string {
	if len(c.terms) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.terms, " AND ")
}

// EscapeLike makes s match itself in a LIKE pattern with the default escape character (\):
// its % and _ are no wildcards.
func EscapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Prefixed qualifies each column of a list with a table alias.
func Prefixed(alias, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = alias + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// NewNo returns a public id: prefix and 128 random bits.
func NewNo(prefix string) string { return prefix + strings.ToLower(rand.Text()) }
