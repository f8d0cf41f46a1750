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

// Write writes one batch of an import inside tx, with one statement. In upsert mode
// new codes are inserted and existing ones updated; in insert mode existing codes are left
// alone. A code this import already wrote from an earlier row is never written again. It
// returns the codes it did not write, and why. Codes must be unique within rows.
func Write(ctx context.Context, tx bun.Tx, taskID int64, rows []Row, insertOnly bool) (map[string]Conflict, error) {
	if len(rows) == 0 {
		return nil, nil
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
	onConflict := `ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name, phone = EXCLUDED.phone, email = EXCLUDED.email,
		city = EXCLUDED.city, level = EXCLUDED.level, last_import_task_id = EXCLUDED.last_import_task_id,
		last_import_row = EXCLUDED.last_import_row, updated_at = now()
		WHERE customers.last_import_task_id IS DISTINCT FROM EXCLUDED.last_import_task_id`
	if insertOnly {
		onConflict = `ON CONFLICT (code) DO NOTHING`
	}
	// The batch goes as seven binary-encoded array parameters of one short statement, not as
	// SQL text: no client-side escaping of thousands of values, nothing large to parse.
	res, err := tx.Tx.QueryContext(ctx, `
		INSERT INTO customers (code, name, phone, email, city, level, last_import_task_id, last_import_row)
		SELECT u.code, u.name, u.phone, u.email, u.city, u.level, $1, u.row_no
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[])
		     AS u(code, name, phone, email, city, level, row_no)
		`+onConflict+` RETURNING code`,
		taskID, cols.code, cols.name, cols.phone, cols.email, cols.city, cols.level, rowNos)
	if err != nil {
		return nil, fmt.Errorf("write customers: %w", err)
	}
	written := make([]string, 0, len(rows))
	for res.Next() {
		var c string
		if err := res.Scan(&c); err != nil {
			res.Close()
			return nil, fmt.Errorf("write customers: %w", err)
		}
		written = append(written, c)
	}
	if err := res.Close(); err != nil {
		return nil, fmt.Errorf("write customers: %w", err)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("write customers: %w", err)
	}
	if len(written) == len(rows) {
		return nil, nil
	}
	return unwritten(ctx, tx, taskID, cols.code, written)
}

// unwritten says why each of codes that is not in written was not written: an earlier
// row of the import taskID wrote it, or it was in the table before.
func unwritten(ctx context.Context, tx bun.Tx, taskID int64, codes, written []string) (map[string]Conflict, error) {
	done := make(map[string]bool, len(written))
	for _, c := range written {
		done[c] = true
	}
	var missing []string
	for _, c := range codes {
		if !done[c] {
			missing = append(missing, c)
		}
	}
	res, err := tx.Tx.QueryContext(ctx, `SELECT code, last_import_task_id, last_import_row FROM customers WHERE code = ANY($1::text[])`,
		pg.Cached([]any{missing})...)
	if err != nil {
		return nil, fmt.Errorf("explain unwritten customers: %w", err)
	}
	defer res.Close()
	type owner struct {
		Code string
		Task *int64
		Row  *int
	}
	var owners []owner
	for res.Next() {
		var o owner
		if err := res.Scan(&o.Code, &o.Task, &o.Row); err != nil {
			return nil, fmt.Errorf("explain unwritten customers: %w", err)
		}
		owners = append(owners, o)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("explain unwritten customers: %w", err)
	}
	out := make(map[string]Conflict, len(owners))
	for _, o := range owners {
		if o.Task != nil && *o.Task == taskID && o.Row != nil {
			out[o.Code] = Conflict{EarlierRow: *o.Row}
		} else {
			out[o.Code] = Conflict{Exists: true}
		}
	}
	return out, nil
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
