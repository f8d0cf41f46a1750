package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// Get runs query on the pool and scans its first row into a new T (a model): the lookup of
// one row by its number or id. No row answers notFound, the error callers branch on; any
// other error is wrapped as "what: err".
func Get[T any](ctx context.Context, db *bun.DB, notFound error, what, query string, args ...any) (*T, error) {
	row := new(T)
	err := One(ctx, db, db.DB, row, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return row, nil
}

// ChangeOne runs a statement that changes the one row its number names, such as the delete
// of a row scope may see. No row changed answers notFound; any other error is wrapped as
// "what: err".
func ChangeOne(ctx context.Context, q Querier, notFound error, what, query string, args ...any) error {
	n, err := Exec(ctx, q, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return notFound
	}
	return nil
}

// List runs query on the pool and scans every row into a T (a model), in the query's order.
// An error is wrapped as "what: err".
func List[T any](ctx context.Context, db *bun.DB, what, query string, args ...any) ([]T, error) {
	var rows []T
	if err := All(ctx, db, db.DB, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rows, nil
}
