package store

import (
	"context"
	"reflect"

	"github.com/taskcenter/taskcenter/store/pg"
)

// ColumnLists maps each model's type to the column list its statements name (for the test
// that keeps them in step).
func ColumnLists() map[reflect.Type]string {
	return map[reflect.Type]string{
		reflect.TypeFor[Task](): taskColumns, reflect.TypeFor[Run](): runColumns, reflect.TypeFor[LogEntry](): logColumns,
		reflect.TypeFor[Item](): itemColumns, reflect.TypeFor[CleanupRound](): roundColumns, reflect.TypeFor[Event](): eventColumns,
	}
}

// ListPlans returns Postgres' plan for the statements of a listing (its page and its
// counts) under f and scope, without running them.
func (s *Tasks) ListPlans(ctx context.Context, f ListFilter, scope Scope) (page, counts string, err error) {
	query, args, _, err := listQuery(f, scope)
	if err != nil {
		return "", "", err
	}
	if page, err = pg.Explain(ctx, s.db, query, args...); err != nil {
		return "", "", err
	}
	query, args = countQuery(f, scope)
	counts, err = pg.Explain(ctx, s.db, query, args...)
	return page, counts, err
}
