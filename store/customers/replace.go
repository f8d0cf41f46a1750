package customers

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// replaceLock is the advisory lock (pg_advisory_xact_lock) a replace import's final step
// holds on the customers table: two replace imports never interleave their removals, and
// the second sees the first's outcome.
const replaceLock = int64(0x637573746f6d6572) // "customer"

// ErrCodesIncomplete is a replace whose recorded codes are not the rows it accepted: it
// removes nothing rather than remove a customer its file holds.
var ErrCodesIncomplete = errors.New("the import's list of codes is incomplete")

// RemoveMissing is a replace import's final step, in tx: it deletes every customer whose
// code is not in the import's file (import_codes), keeping each one's before-image for an
// undo, forgets the codes, and returns how many it removed. accepted is the rows the import
// wrote: when import_codes does not hold exactly that many codes, nothing is removed and
// ErrCodesIncomplete is returned.
//
// Removed customers are deleted, not flagged inactive: the table has no such flag, and every
// reader (the export, the report, insert mode's "code exists") would have to learn to skip
// flagged rows, while a flagged row would keep holding its code. The before-image keeps the
// whole row, id included, so an undo puts it back as it was.
func RemoveMissing(ctx context.Context, tx bun.Tx, taskID, accepted int64) (int64, error) {
	if _, err := pg.Exec(ctx, tx.Tx, `SELECT pg_advisory_xact_lock($1)`, replaceLock); err != nil {
		return 0, fmt.Errorf("lock the customers for a replace: %w", err)
	}
	var codes int64
	if err := tx.Tx.QueryRowContext(ctx, `SELECT count(*) FROM import_codes WHERE task_id = $1`, pg.Cached([]any{taskID})...).Scan(&codes); err != nil {
		return 0, fmt.Errorf("count the import's codes: %w", err)
	}
	if codes != accepted {
		return 0, fmt.Errorf("%w: %d codes for %d rows written", ErrCodesIncomplete, codes, accepted)
	}
	var removed int64
	err := tx.Tx.QueryRowContext(ctx, `
		WITH gone AS (
			DELETE FROM customers c
			WHERE NOT EXISTS (SELECT 1 FROM import_codes k WHERE k.task_id = $1 AND k.code = c.code)
			RETURNING c.id, c.code, c.name, c.phone, c.email, c.city, c.level, c.last_import_task_id, c.last_import_row, c.created_by_task_id, c.created_by_row,
			          c.created_at, c.updated_at
		), img AS (
			INSERT INTO import_before_images (task_id, code, before, removed)
			SELECT $1, gone.code, `+beforeImage("gone")+`, true FROM gone
			ON CONFLICT (task_id, code) DO NOTHING
		)
		SELECT count(*) FROM gone`, pg.Cached([]any{taskID})...).Scan(&removed)
	if err != nil {
		return 0, fmt.Errorf("remove the customers not in the file: %w", err)
	}
	return removed, ForgetCodes(ctx, tx, taskID)
}

// CountMissing is a dry run's replace step: how many customers a replace with this file
// would remove (those whose code is not in import_codes).
func CountMissing(ctx context.Context, tx bun.Tx, taskID int64) (int64, error) {
	var n int64
	err := tx.Tx.QueryRowContext(ctx, `SELECT count(*) FROM customers c
		WHERE NOT EXISTS (SELECT 1 FROM import_codes k WHERE k.task_id = $1 AND k.code = c.code)`, pg.Cached([]any{taskID})...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the customers not in the file: %w", err)
	}
	return n, nil
}

// ForgetCodes deletes an import's recorded codes, in the transaction of its last step.
func ForgetCodes(ctx context.Context, tx bun.Tx, taskID int64) error {
	if _, err := pg.Exec(ctx, tx.Tx, `DELETE FROM import_codes WHERE task_id = $1`, taskID); err != nil {
		return fmt.Errorf("forget the import's codes: %w", err)
	}
	return nil
}
