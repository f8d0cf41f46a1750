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
