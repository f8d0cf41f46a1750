package customers

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// By counts customers by one column (city or level) inside tx (a report's snapshot), most
// first.
func By(ctx context.Context, tx bun.Tx, column string) ([][]any, error) {
	if column != "city" && column != "level" {
		return nil, fmt.Errorf("customers by %q: not a breakdown", column)
	}
	rows, err := tx.Tx.QueryContext(ctx, `SELECT `+column+`, count(*) FROM customers GROUP BY 1 ORDER BY 2 DESC, 1`, pg.Cached(nil)...)
	if err != nil {
		return nil, err
	}
	return pg.Collect(rows, func(row func(dest ...any) error) ([]any, error) {
		var k string
		var n int64
		err := row(&k, &n)
		return []any{k, n}, err
	})
}

// ImportsByDay counts the imports scope may see, and their rows, per UTC day over the last
// days days, newest first, inside tx.
func ImportsByDay(ctx context.Context, tx bun.Tx, scope pg.Scope, days int) ([][]any, error) {
	rows, err := tx.Tx.QueryContext(ctx, `
		SELECT (created_at AT TIME ZONE 'UTC')::date, count(*), sum(total_count), sum(success_count), sum(failed_count)
		FROM tasks WHERE type = 'import:customers' AND created_at >= now() - make_interval(days => $1) AND ($2 OR owner = $3)
		GROUP BY 1 ORDER BY 1 DESC`, pg.Cached([]any{days, scope.Admin, scope.Owner})...)
	if err != nil {
		return nil, err
	}
	return pg.Collect(rows, func(row func(dest ...any) error) ([]any, error) {
		var day time.Time
		var n, total, success, failed int64
		err := row(&day, &n, &total, &success, &failed)
		return []any{day.Format(time.DateOnly), n, total, success, failed}, err
	})
}
