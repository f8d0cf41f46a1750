package customers

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

// Undone is what Undo did with one batch of an import's before-images.
type Undone struct {
	// Restored counts the customers put back as they were before the import: changed rows
	// restored, inserted rows deleted (or already gone), removed rows inserted again.
	Restored int
	// Conflicts are the customers left alone because something changed them after the import.
	Conflicts []UndoConflict
	// Last is the last code of the batch, where the next one starts.
	Last string
}

// UndoConflict is a customer an undo did not restore.
type UndoConflict struct {
	Code string
	Row  int // the import's spreadsheet row, 0 for a customer a replace removed
	Kind ConflictKind
	// Now is the customer as it is now (code, name, phone, email, city, level), or nil.
	Now []string
}

// ConflictKind says why an undo left a customer alone.
type ConflictKind int

// Why an undo left a customer alone.
const (
	ChangedSince ConflictKind = iota + 1 // a later import or an edit changed it
	DeletedSince                         // deleted after the import changed it
	AddedSince                           // added again after a replace removed it
)

// Undo restores, in tx, the next batch of up to limit customers the import importID changed,
// those after the code after in code order: each changed customer gets its before-image back,
// each inserted one is deleted, each one a replace removed is inserted again with its old id.
// A customer changed after the import ended (finished) — by a later import (its provenance is
// no longer the import's) or an edit (updated_at after the end) — is not overwritten: it is
// returned as a conflict. Restoring a customer twice does nothing more (an undo's batches
// commit with its checkpoint, so a resumed undo starts after the last committed one).
// Last is empty when there was nothing left.
func Undo(ctx context.Context, tx bun.Tx, importID int64, finished time.Time, after string, limit int) (Undone, error) {
	codes, err := nextImageCodes(ctx, tx, importID, after, limit)
	if err != nil || len(codes) == 0 {
		return Undone{}, err
	}
	// Lock the customers first; the next statement's snapshot then sees them as they are.
	if _, err := pg.Exec(ctx, tx.Tx, `SELECT 1 FROM customers WHERE code = ANY($1::text[]) ORDER BY code FOR UPDATE`, codes); err != nil {
		return Undone{}, fmt.Errorf("lock the customers to undo: %w", err)
	}
	imgs, err := compareImages(ctx, tx, importID, codes, finished)
	if err != nil {
		return Undone{}, err
	}
	out := Undone{Last: codes[len(codes)-1]}
	var drop, restore, reinsert []string
	for _, m := range imgs {
		var kind ConflictKind
		switch {
		case m.Removed && !m.Present:
			reinsert = append(reinsert, m.Code)
		case m.Removed:
			kind = AddedSince
		case m.Inserted && !m.Present:
			out.Restored++ // already gone, as it was before the import
		case !m.Present:
			kind = DeletedSince
		case !m.Untouched:
			kind = ChangedSince
		case m.Inserted:
			drop = append(drop, m.Code)
		default:
			restore = append(restore, m.Code)
		}
		if kind != 0 {
			out.Conflicts = append(out.Conflicts, m.conflict(kind))
		}
	}
	for _, step := range []struct {
		codes []string
		query string
	}{
		{drop, undoDrop},
		{restore, undoRestore},
		{reinsert, undoReinsert},
	} {
		if len(step.codes) == 0 {
			continue
		}
		n, err := pg.Exec(ctx, tx.Tx, step.query, importID, step.codes)
		if err != nil {
			return Undone{}, fmt.Errorf("undo customers: %w", err)
		}
		out.Restored += int(n)
	}
	return out, nil
}

// The statements that undo one batch: $1 is the import, $2 the codes.
const (
	undoDrop    = `DELETE FROM customers WHERE code = ANY($2::text[]) AND $1::bigint IS NOT NULL`
	undoRestore = `UPDATE customers c SET name = b.before->>'name', phone = b.before->>'phone', email = b.before->>'email',
			city = b.before->>'city', level = b.before->>'level', last_import_task_id = (b.before->>'last_import_task_id')::bigint,
			last_import_row = (b.before->>'last_import_row')::int, updated_at = (b.before->>'updated_at')::timestamptz
			FROM import_before_images b WHERE b.task_id = $1 AND b.code = c.code AND c.code = ANY($2::text[])`
	undoReinsert = `INSERT INTO customers (id, code, name, phone, email, city, level, last_import_task_id, last_import_row, created_by_task_id,
			                       created_by_row, created_at, updated_at)
			OVERRIDING SYSTEM VALUE
			SELECT (b.before->>'id')::bigint, b.code, b.before->>'name', b.before->>'phone', b.before->>'email', b.before->>'city',
			       b.before->>'level', (b.before->>'last_import_task_id')::bigint, (b.before->>'last_import_row')::int,
			       (b.before->>'created_by_task_id')::bigint, (b.before->>'created_by_row')::int,
			       (b.before->>'created_at')::timestamptz, (b.before->>'updated_at')::timestamptz
			FROM import_before_images b WHERE b.task_id = $1 AND b.code = ANY($2::text[])`
)

// nextImageCodes lists the codes of the next batch of the import's before-images, after the
// code after, in code order.
func nextImageCodes(ctx context.Context, tx bun.Tx, importID int64, after string, limit int) ([]string, error) {
	rows, err := tx.Tx.QueryContext(ctx, `SELECT code FROM import_before_images WHERE task_id = $1 AND code > $2 ORDER BY code LIMIT $3`,
		pg.Cached([]any{importID, after, limit})...)
	if err != nil {
		return nil, fmt.Errorf("read the before-images: %w", err)
	}
	codes, err := pg.Collect(rows, pg.Scalar[string])
	if err != nil {
		return nil, fmt.Errorf("read the before-images: %w", err)
	}
	return codes, nil
}

// image is one before-image beside the customer as it is now.
type image struct {
	Code                                  string
	Row                                   int
	Inserted, Removed, Present, Untouched bool
	Name, Phone, Email, City, Level       *string
}

func (m image) conflict(kind ConflictKind) UndoConflict {
	c := UndoConflict{Code: m.Code, Row: m.Row, Kind: kind}
	if m.Present {
		c.Now = []string{m.Code, deref(m.Name), deref(m.Phone), deref(m.Email), deref(m.City), deref(m.Level)}
	}
	return c
}

// compareImages reads the before-images of codes beside the customers as they are now:
// Untouched when the customer still carries the import's provenance and was not edited after
// it ended (finished).
func compareImages(ctx context.Context, tx bun.Tx, importID int64, codes []string, finished time.Time) ([]image, error) {
	rows, err := tx.Tx.QueryContext(ctx, `
		SELECT b.code, coalesce(b.row_no, 0), b.before IS NULL, b.removed, c.code IS NOT NULL,
		       coalesce(c.last_import_task_id = $1 AND c.updated_at <= $3, false),
		       c.name, c.phone, c.email, c.city, c.level
		FROM import_before_images b LEFT JOIN customers c ON c.code = b.code
		WHERE b.task_id = $1 AND b.code = ANY($2::text[]) ORDER BY b.code`, pg.Cached([]any{importID, codes, finished})...)
	if err != nil {
		return nil, fmt.Errorf("compare the before-images: %w", err)
	}
	imgs, err := pg.Collect(rows, func(row func(dest ...any) error) (m image, err error) {
		err = row(&m.Code, &m.Row, &m.Inserted, &m.Removed, &m.Present, &m.Untouched, &m.Name, &m.Phone, &m.Email, &m.City, &m.Level)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("compare the before-images: %w", err)
	}
	return imgs, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ImagesToUndo readies, in tx, the before-images an undo of the import importID goes
// through, and counts them: the import kept one for each customer it changed or removed; the
// ones it inserted (created_by_task_id, no image written while importing, so a big import of
// new customers costs no more than before) get theirs now, empty, from one scan of the
// customers that are still there. Run again, it adds nothing.
func ImagesToUndo(ctx context.Context, tx bun.Tx, importID int64) (int64, error) {
	if _, err := pg.Exec(ctx, tx.Tx, `INSERT INTO import_before_images (task_id, code, row_no, before)
		SELECT $1::bigint, code, created_by_row, NULL FROM customers WHERE created_by_task_id = $1::bigint
		ON CONFLICT (task_id, code) DO NOTHING`, importID); err != nil {
		return 0, fmt.Errorf("find the customers the import inserted: %w", err)
	}
	var n int64
	err := tx.Tx.QueryRowContext(ctx, `SELECT count(*) FROM import_before_images WHERE task_id = $1`, pg.Cached([]any{importID})...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the before-images: %w", err)
	}
	return n, nil
}
