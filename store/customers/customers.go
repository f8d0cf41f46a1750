// Package customers holds the customers table: what an import writes (Write) and what the
// customer export (Count, Page) and the customer report (By, ImportsByDay in reports.go) read.
// Every function runs inside the caller's transaction: the import writes each batch in the
// transaction that advances its checkpoint, and the export and the report read one snapshot.
package customers

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/config"
	"github.com/taskcenter/taskcenter/store/pg"
)

// Row is one validated spreadsheet row an import writes.
type Row struct {
	Row   int // spreadsheet row number (header = 1)
	Code  string
	Name  string
	Phone string
	Email string
	City  string
	Level string
}

// Conflict is a code an import did not write.
type Conflict struct {
	// EarlierRow is set when this same import wrote the code from an earlier row of the file.
	EarlierRow int
	// Exists is set in insert mode when the code was already in the table before.
	Exists bool
}

// Mode says how Write writes a batch.
type Mode struct {
	// InsertOnly leaves existing codes alone (a Conflict each); otherwise they are updated.
	InsertOnly bool
	// DryRun writes no customer: every check runs against the table as it is, and the codes
	// go to import_codes so a code repeated in a later batch is still found.
	DryRun bool
	// KeepCodes records the file's codes in import_codes (a replace import removes the
	// customers whose code is not there). A dry run always keeps them.
	KeepCodes bool
}

// Written is what Write did with a batch (or, in a dry run, would have done).
type Written struct {
	// Conflicts are the codes not written, and why.
	Conflicts map[string]Conflict
	// Inserted are new codes, Updated existing codes whose values changed, Unchanged existing
	// codes written with the values they had (only their provenance moves to this import).
	Inserted, Updated, Unchanged int
}

// Write writes one batch of an import inside tx, with one statement. New codes are
// inserted; existing ones are updated, or in insert mode left alone. A code this import
// already wrote from an earlier row is never written again. Every row written carries the
// import's provenance, unchanged ones too; an unchanged row keeps its updated_at. A real
// run keeps the before-image of every customer it changes (import_before_images) and marks
// the ones it inserts (created_by_task_id), so it can be undone. Codes must be unique within rows.
//
// The statement classifies each row by reading the old row first, locked (FOR UPDATE), in
// a CTE the upsert joins: Postgres 15 has no OLD in RETURNING. The lock also makes the
// before-image the row the upsert overwrites when another transaction wrote it meanwhile.
func Write(ctx context.Context, tx bun.Tx, taskID int64, rows []Row, m Mode) (Written, error) {
	if len(rows) == 0 {
		return Written{}, nil
	}
	cols := struct{ code, name, phone, email, city, level []string }{}
	rowNos := make([]int32, len(rows))
	for i, r := range rows {
		cols.code = append(cols.code, r.Code)
		cols.name = append(cols.name, r.Name)
		cols.phone = append(cols.phone, r.Phone)
		cols.email = append(cols.email, r.Email)
		cols.city = append(cols.city, r.City)
		cols.level = append(cols.level, r.Level)
		rowNos[i] = int32(r.Row)
	}
	query := writeStatement(m)
	// The batch goes as seven binary-encoded array parameters of one short statement, not as
	// SQL text: no client-side escaping of thousands of values, nothing large to parse.
	args := []any{taskID, cols.code, cols.name, cols.phone, cols.email, cols.city, cols.level, rowNos, m.KeepCodes || m.DryRun}
	if m.DryRun {
		args = append(args, m.InsertOnly)
	}
	res, err := tx.Tx.QueryContext(ctx, query, args...)
	if err != nil {
		return Written{}, fmt.Errorf("write customers: %w", err)
	}
	defer res.Close()
	var out Written
	for res.Next() {
		var (
			code              string
			written, inserted bool
			existed, differs  bool
			ownTask           bool
			earlier           *int
		)
		if err := res.Scan(&code, &written, &inserted, &existed, &differs, &ownTask, &earlier); err != nil {
			return Written{}, fmt.Errorf("write customers: %w", err)
		}
		switch {
		case !written && ownTask && earlier != nil:
			out.conflict(code, Conflict{EarlierRow: *earlier})
		case !written:
			out.conflict(code, Conflict{Exists: true})
		case inserted:
			out.Inserted++
		case differs:
			out.Updated++
		default:
			out.Unchanged++
		}
	}
	if err := res.Err(); err != nil {
		return Written{}, fmt.Errorf("write customers: %w", err)
	}
	return out, nil
}

func (w *Written) conflict(code string, c Conflict) {
	if w.Conflicts == nil {
		w.Conflicts = map[string]Conflict{}
	}
	w.Conflicts[code] = c
}

// The statements' shared parts. $1 the import, $2…$8 the batch's columns, $9 keep the
// codes, and in a dry run $10 insert only. Each answers, per row of the batch: code, written, inserted, existed,
// differs (the values change), own (an earlier row of this import has the code), earlier_row.
const (
	writeInput = `input AS (
		SELECT u.code, u.name, u.phone, u.email, u.city, u.level, u.row_no
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[])
		     AS u(code, name, phone, email, city, level, row_no))`
	differs = `(o.name, o.phone, o.email, o.city, o.level) IS DISTINCT FROM (i.name, i.phone, i.email, i.city, i.level)`
	keep    = `kept AS (
		INSERT INTO import_codes (task_id, code, row_no) SELECT $1::bigint, code, row_no FROM res WHERE written AND $9::boolean
		ON CONFLICT (task_id, code) DO NOTHING)`
)

// writeStatement is the batch's one statement for mode m.
func writeStatement(m Mode) string {
	if m.DryRun {
		// Nothing is written but the codes: what a real run would do is read from the table
		// as it is, and an earlier row of the file from import_codes.
		return `WITH ` + writeInput + `,
		old AS (SELECT c.code, c.name, c.phone, c.email, c.city, c.level FROM customers c WHERE c.code = ANY($2::text[])),
		seen AS (SELECT k.code, k.row_no FROM import_codes k WHERE k.task_id = $1::bigint AND k.code = ANY($2::text[])),
		res AS (
			SELECT i.code, i.row_no, s.row_no IS NULL AND NOT ($10::boolean AND o.code IS NOT NULL) AS written,
			       o.code IS NULL AS inserted, o.code IS NOT NULL AS existed, ` + differs + ` AS differs,
			       s.row_no IS NOT NULL AS own, s.row_no AS earlier_row
			FROM input i LEFT JOIN seen s ON s.code = i.code LEFT JOIN old o ON o.code = i.code),
		` + keep + `
		SELECT code, written, written AND inserted, existed, differs, own, earlier_row FROM res`
	}
	onConflict := `ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name, phone = EXCLUDED.phone, email = EXCLUDED.email,
		city = EXCLUDED.city, level = EXCLUDED.level, last_import_task_id = EXCLUDED.last_import_task_id,
		last_import_row = EXCLUDED.last_import_row,
		updated_at = CASE WHEN (customers.name, customers.phone, customers.email, customers.city, customers.level)
		                       IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.phone, EXCLUDED.email, EXCLUDED.city, EXCLUDED.level)
		                  THEN now() ELSE customers.updated_at END
		WHERE customers.last_import_task_id IS DISTINCT FROM EXCLUDED.last_import_task_id`
	if m.InsertOnly {
		onConflict = `ON CONFLICT (code) DO NOTHING`
	}
	// The upsert joins old so that old is read (and locked) before any row is written: a
	// row this statement had already updated would be skipped by FOR UPDATE.
	return `WITH ` + writeInput + `,
		old AS (
			SELECT c.id, c.code, c.name, c.phone, c.email, c.city, c.level, c.last_import_task_id, c.last_import_row, c.created_by_task_id, c.created_by_row,
			       c.created_at, c.updated_at
			FROM customers c WHERE c.code = ANY($2::text[]) FOR UPDATE),
		up AS (
			INSERT INTO customers (code, name, phone, email, city, level, last_import_task_id, last_import_row, created_by_task_id, created_by_row)
			SELECT i.code, i.name, i.phone, i.email, i.city, i.level, $1::bigint, i.row_no, $1::bigint, i.row_no FROM input i LEFT JOIN old o ON o.code = i.code
			` + onConflict + `
			RETURNING code, (xmax = 0) AS inserted),
		res AS (
			SELECT i.code, i.row_no, up.code IS NOT NULL AS written, coalesce(up.inserted, false) AS inserted,
			       o.code IS NOT NULL AS existed, ` + differs + ` AS differs,
			       o.last_import_task_id IS NOT DISTINCT FROM $1::bigint AS own, o.last_import_row AS earlier_row,
			       o.id, o.name, o.phone, o.email, o.city, o.level, o.last_import_task_id, o.last_import_row, o.created_by_task_id, o.created_by_row, o.created_at, o.updated_at
			FROM input i LEFT JOIN up ON up.code = i.code LEFT JOIN old o ON o.code = i.code),
		img AS (
			INSERT INTO import_before_images (task_id, code, row_no, before)
			SELECT $1::bigint, code, row_no, CASE WHEN inserted OR NOT existed THEN NULL ELSE ` + beforeImage("res") + ` END
			FROM res WHERE written AND NOT inserted AND (NOT existed OR differs)
			ON CONFLICT (task_id, code) DO NOTHING),
		` + keep + `
		SELECT code, written, inserted, existed, differs, own, earlier_row FROM res`
}

// beforeImage is the jsonb of a customer row r as import_before_images keeps it: every
// column but the code (its key there).
func beforeImage(r string) string {
	return `jsonb_build_object('id', ` + r + `.id, 'name', ` + r + `.name, 'phone', ` + r + `.phone, 'email', ` + r + `.email,
		'city', ` + r + `.city, 'level', ` + r + `.level, 'last_import_task_id', ` + r + `.last_import_task_id,
		'last_import_row', ` + r + `.last_import_row, 'created_by_task_id', ` + r + `.created_by_task_id, 'created_by_row', ` + r + `.created_by_row,
		'created_at', ` + r + `.created_at, 'updated_at', ` + r + `.updated_at)`
}

// Query narrows a customer export; empty fields match everything.
type Query struct {
	City       string
	Level      string
	CodePrefix string
}

// Exported is one customer as the export writes it.
type Exported struct {
	ID        int64     `bun:"id"`
	Code      string    `bun:"code"`
	Name      string    `bun:"name"`
	Phone     string    `bun:"phone"`
	Email     string    `bun:"email"`
	City      string    `bun:"city"`
	Level     string    `bun:"level"`
	CreatedAt time.Time `bun:"created_at"`
	UpdatedAt time.Time `bun:"updated_at"`
}

func (q Query) conditions() *pg.Conditions {
	c := &pg.Conditions{}
	if q.City != "" {
		c.And("city = " + c.Arg(q.City))
	}
	if q.Level != "" {
		c.And("level = " + c.Arg(q.Level))
	}
	if q.CodePrefix != "" {
		c.And("code LIKE " + c.Arg(pg.EscapeLike(q.CodePrefix)+"%") + ` ESCAPE '\'`)
	}
	return c
}

// Count counts the customers q selects, inside tx (an export's snapshot).
func Count(ctx context.Context, tx bun.Tx, q Query) (int64, error) {
	c := q.conditions()
	var n int64
	err := tx.Tx.QueryRowContext(ctx, `SELECT count(*) FROM customers`+c.Where(), pg.Cached(c.Args)...).Scan(&n)
	return n, err
}

// Page returns up to limit customers q selects with id > after, in id order, inside
// tx (an export's snapshot).
func Page(ctx context.Context, tx bun.Tx, q Query, after int64, limit int) ([]Exported, error) {
	c := q.conditions()
	c.And("id > " + c.Arg(after) + "::bigint")
	// Scanned field by field, not through bun's model scan: a 100,000-row export spent a fifth
	// of its CPU in the reflection.
	res, err := tx.Tx.QueryContext(ctx, `SELECT id, code, name, phone, email, city, level, created_at, updated_at FROM customers`+
		c.Where()+` ORDER BY id LIMIT `+c.Arg(limit), pg.Cached(c.Args)...)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	rows := make([]Exported, 0, limit)
	for res.Next() {
		var e Exported
		if err := res.Scan(&e.ID, &e.Code, &e.Name, &e.Phone, &e.Email, &e.City, &e.Level, &e.CreatedAt, &e.UpdatedAt); err != nil {
			return nil, err
		}
		rows = append(rows, e)
	}
	return rows, res.Err()
}

// ExportPlans returns Postgres' plan for the count and the first page of a customer export
// under each kind of filter, so a test or a benchmark can check that an index serves each
// one. Nothing is executed.
func ExportPlans(ctx context.Context, db *bun.DB) (map[string]string, error) {
	out := map[string]string{}
	for name, q := range map[string]Query{
		"city": {City: "Hangzhou"}, "level": {Level: "gold"}, "code_prefix": {CodePrefix: "C0001"},
		"city_and_level": {City: "Hangzhou", Level: "gold"},
	} {
		c := q.conditions()
		count := `SELECT count(*) FROM customers` + c.Where()
		c.And("id > " + c.Arg(int64(0)) + "::bigint")
		page := `SELECT id, code FROM customers` + c.Where() + ` ORDER BY id LIMIT ` + c.Arg(config.Default().Export.PageSize)
		for kind, query := range map[string]string{"count": count, "page": page} {
			args := c.Args
			if kind == "count" {
				args = args[:len(args)-2]
			}
			plan, err := pg.Explain(ctx, db, query, args...)
			if err != nil {
				return nil, fmt.Errorf("explain %s %s: %w", name, kind, err)
			}
			out[name+"/"+kind] = plan
		}
	}
	return out, nil
}
