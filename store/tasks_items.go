package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/store/pg"
)

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

// InsertItems records rejected rows inside tx, as one statement with array parameters.
func InsertItems(ctx context.Context, tx bun.Tx, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	taskIDs := make([]int64, len(items))
	rowNos := make([]int32, len(items))
	fields := make([]string, len(items))
	messages := make([]string, len(items))
	raws := make([]string, len(items))
	for i, it := range items {
		taskIDs[i], rowNos[i], fields[i], messages[i] = it.TaskID, int32(it.Row), it.Field, it.Message
		raws[i] = string(it.Raw)
		if len(it.Raw) == 0 {
			raws[i] = "[]"
		}
	}
	_, err := pg.Exec(ctx, tx.Tx, `
		INSERT INTO task_items (task_id, row_no, field, message, raw)
		SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::jsonb[])`,
		taskIDs, rowNos, fields, messages, raws)
	if err != nil {
		return fmt.Errorf("record rejected rows: %w", err)
	}
	return nil
}

// Items returns a task's rejected rows in row order, after row afterRow.
func (s *Tasks) Items(ctx context.Context, taskID int64, afterRow, limit int) ([]Item, error) {
	return pg.List[Item](ctx, s.db, "list rejected rows",
		`SELECT `+itemColumns+` FROM task_items WHERE task_id = $1 AND row_no > $2
		ORDER BY row_no, id LIMIT $3`, taskID, afterRow, limit)
}

// FieldCount is how many of a task's rejected rows one field was at fault in.
type FieldCount struct {
	Field string `bun:"field"`
	Count int64  `bun:"count"`
}

// RejectedByField counts a task's rejected rows by the field at fault, most first (ties by
// field name): a row rejected for its phone and its email counts once under each. The
// grouping is by field only: the stored message is free text carrying the row's own values
// ("K001 already appears in row 7"), with no stable reason code to group by. archived reads
// the archive's copy of the rows.
func (s *Tasks) RejectedByField(ctx context.Context, taskID int64, archived bool) ([]FieldCount, error) {
	table := "task_items"
	if archived {
		table = "task_items_archive"
	}
	return pg.List[FieldCount](ctx, s.db, fmt.Sprintf("count rejected rows of task %d by field", taskID), `
		SELECT f AS field, count(*) AS count
		FROM `+table+` i, unnest(string_to_array(i.field, ',')) AS f
		WHERE i.task_id = $1 AND f <> ''
		GROUP BY f ORDER BY count(*) DESC, f`, taskID)
}

// CountsIn reads a task's committed counts inside tx (a batch's transaction, which holds the
// task row locked), for a step that depends on every batch before it.
func CountsIn(ctx context.Context, tx bun.Tx, taskID int64) (total, success, failed int64, err error) {
	err = tx.Tx.QueryRowContext(ctx, `SELECT total_count, success_count, failed_count FROM tasks WHERE id = $1`,
		pg.Cached([]any{taskID})...).Scan(&total, &success, &failed)
	if err != nil {
		err = fmt.Errorf("read the task's counts: %w", err)
	}
	return total, success, failed, err
}
