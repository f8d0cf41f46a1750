package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/store/pg"
)

// Item is one rejected row of an import.
type Item struct {
	bun.BaseModel `bun:"table:task_items"`

	ID      int64  `bun:"id,pk,autoincrement"`
	TaskID  int64  `bun:"task_id"`
	Row     int    `bun:"row_no"`
	Field   string `bun:"field"`   // the fields at fault, comma-separated
	Message string `bun:"message"` // "phone: must be 11 digits starting with 1; email: …"
	// Messages are Message's parts as catalogue messages, one per field at fault; nil on
	// rows stored before they were kept, which have only Field and Message.
	Messages  []task.FieldMessage `bun:"messages,type:jsonb,nullzero"`
	Raw       json.RawMessage     `bun:"raw,type:jsonb"`
	CreatedAt time.Time           `bun:"created_at,nullzero,notnull,default:now()"`
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
	parts := make([]*string, len(items))
	raws := make([]string, len(items))
	for i, it := range items {
		taskIDs[i], rowNos[i], fields[i], messages[i] = it.TaskID, int32(it.Row), it.Field, it.Message
		if it.Messages != nil {
			b, err := json.Marshal(it.Messages)
			if err != nil {
				return fmt.Errorf("record rejected rows: %w", err)
			}
			s := string(b)
			parts[i] = &s
		}
		raws[i] = string(it.Raw)
		if len(it.Raw) == 0 {
			raws[i] = "[]"
		}
	}
	_, err := pg.Exec(ctx, tx.Tx, `
		INSERT INTO task_items (task_id, row_no, field, message, messages, raw)
		SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[])`,
		taskIDs, rowNos, fields, messages, parts, raws)
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

// FieldCount is how many of a task's rejected rows one field was at fault in, and why.
type FieldCount struct {
	Field string
	Count int64
	// Reasons count the field's rows by the catalogue message that rejected them, most
	// first (ties by code). A row stored without its messages counts in Count only.
	Reasons []ReasonCount
}

// ReasonCount is how many rejected rows one field was at fault in for one reason.
type ReasonCount struct {
	Code string // the row message's catalogue code ("row.phone")
	// Params are the message's params when every row of the group has the same ("max" of a
	// "row.too_long" of one row), else nil: the reason is said without the rows' values.
	Params msg.Params
	Count  int64
}

// rejectedGroup is one row of RejectedByField's grouping: a field's total (total set) or
// one of its reasons.
type rejectedGroup struct {
	Field  string     `bun:"field"`
	Code   *string    `bun:"code"`
	Params msg.Params `bun:"params,type:jsonb,nullzero"`
	Count  int64      `bun:"count"`
	Total  bool       `bun:"total"`
}

// RejectedByField counts a task's rejected rows by the field at fault and, under each
// field, by reason, most first (ties by field name, then code): a row rejected for its phone
// and its email counts once under each. A reason is the code of the row's message for that
// field; its params are kept only when the whole group shares them (the values a message
// names, "K001 already appears in row 7", differ from row to row). Rows stored without
// messages count under their fields with no reason. archived reads the archive's copy of
// the rows.
func (s *Tasks) RejectedByField(ctx context.Context, taskID int64, archived bool) ([]FieldCount, error) {
	table := "task_items"
	if archived {
		table = "task_items_archive"
	}
	groups, err := pg.List[rejectedGroup](ctx, s.db, fmt.Sprintf("count rejected rows of task %d by field and reason", taskID), `
		WITH parts AS (
			SELECT i.id, f AS field, NULL::text AS code, NULL::jsonb AS params
			FROM `+table+` i, unnest(string_to_array(i.field, ',')) AS f
			WHERE i.task_id = $1 AND i.messages IS NULL AND f <> ''
			UNION ALL
			SELECT i.id, m->>'field', m->>'code', COALESCE(m->'params', '{}'::jsonb)
			FROM `+table+` i, jsonb_array_elements(i.messages) AS m
			WHERE i.task_id = $1 AND jsonb_typeof(i.messages) = 'array' AND COALESCE(m->>'field', '') <> ''
		)
		SELECT field, code, count(DISTINCT id) AS count, GROUPING(code) = 1 AS total,
			CASE WHEN GROUPING(code) = 0 AND count(DISTINCT params) = 1 AND min(params::text) <> '{}'
				THEN min(params::text)::jsonb END AS params
		FROM parts
		GROUP BY GROUPING SETS ((field), (field, code))
		HAVING GROUPING(code) = 1 OR code IS NOT NULL
		ORDER BY field, total DESC, count(DISTINCT id) DESC, code`, taskID)
	if err != nil {
		return nil, err
	}
	var out []FieldCount
	for _, g := range groups {
		if g.Total {
			out = append(out, FieldCount{Field: g.Field, Count: g.Count})
			continue
		}
		last := &out[len(out)-1]
		last.Reasons = append(last.Reasons, ReasonCount{Code: *g.Code, Params: g.Params, Count: g.Count})
	}
	slices.SortStableFunc(out, func(a, b FieldCount) int { return cmp.Compare(b.Count, a.Count) })
	return out, nil
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
