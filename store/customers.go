package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// CustomerRow is one validated spreadsheet row an import writes.
type CustomerRow struct {
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

// WriteCustomers writes one batch of an import inside tx, with one statement. In upsert mode
// new codes are inserted and existing ones updated; in insert mode existing codes are left
// alone. A code this import already wrote from an earlier row is never written again. It
// returns the codes it did not write, and why. Codes must be unique within rows.
func WriteCustomers(ctx context.Context, tx bun.Tx, taskID int64, rows []CustomerRow, insertOnly bool) (map[string]Conflict, error) {
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
	done := make(map[string]bool, len(written))
	for _, c := range written {
		done[c] = true
	}
	var missing []string
	for _, c := range cols.code {
		if !done[c] {
			missing = append(missing, c)
		}
	}
	var owners []struct {
		Code string `bun:"code"`
		Task *int64 `bun:"last_import_task_id"`
		Row  *int   `bun:"last_import_row"`
	}
	if err := tx.NewRaw(`SELECT code, last_import_task_id, last_import_row FROM customers WHERE code IN (?)`, bun.In(missing)).
		Scan(ctx, &owners); err != nil {
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

// Item is one rejected row of an import.
type Item struct {
	bun.BaseModel `bun:"table:task_items"`

	ID        int64           `bun:"id,pk,autoincrement"`
	TaskID    int64           `bun:"task_id"`
	Row       int             `bun:"row_no"`
	Field     string          `bun:"field"`   // the fields at fault, comma-separated
	Message   string          `bun:"message"` // "phone: must be 11 digits starting with 1; email: …"
	Raw       json.RawMessage `bun:"raw,type:jsonb"`
	CreatedAt time.Time       `bun:"created_at,nullzero,notnull,default:now()"`
}

// InsertItems records rejected rows inside tx.
func InsertItems(ctx context.Context, tx bun.Tx, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	if _, err := tx.NewInsert().Model(&items).Exec(ctx); err != nil {
		return fmt.Errorf("record rejected rows: %w", err)
	}
	return nil
}

// Items returns a task's rejected rows in row order, after row afterRow.
func (s *Store) Items(ctx context.Context, taskID int64, afterRow, limit int) ([]Item, error) {
	var items []Item
	err := s.db.NewSelect().Model(&items).Where("task_id = ? AND row_no > ?", taskID, afterRow).
		Order("row_no", "id").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list rejected rows: %w", err)
	}
	return items, nil
}
