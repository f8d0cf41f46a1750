package uploads

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskcenter/taskcenter/store/pg"
)

// SavedMapping is a column mapping an owner saved for a header set.
type SavedMapping struct {
	Columns map[string]string // header → field, as the owner wrote it
	// SavedAt is when the mapping was last saved.
	SavedAt time.Time
}

// SaveMapping keeps columns as owner's mapping for the header set headerKey, replacing the one
// saved before.
func (s *Uploads) SaveMapping(ctx context.Context, owner, headerKey string, columns map[string]string) error {
	doc, err := json.Marshal(columns)
	if err != nil {
		return fmt.Errorf("save column mapping: %w", err)
	}
	_, err = pg.Exec(ctx, s.db.DB, `INSERT INTO column_mappings (owner, header_key, columns) VALUES ($1, $2, $3)
		ON CONFLICT (owner, header_key) DO UPDATE SET columns = EXCLUDED.columns, updated_at = now()`, owner, headerKey, string(doc))
	if err != nil {
		return fmt.Errorf("save column mapping: %w", err)
	}
	return nil
}

// FindMapping returns owner's saved mapping for the header set headerKey; nil when there is none.
func (s *Uploads) FindMapping(ctx context.Context, owner, headerKey string) (*SavedMapping, error) {
	var row struct {
		Columns   json.RawMessage `bun:"columns"`
		UpdatedAt time.Time       `bun:"updated_at"`
	}
	err := pg.One(ctx, s.db, s.db.DB, &row, `SELECT columns, updated_at FROM column_mappings WHERE owner = $1 AND header_key = $2`, owner, headerKey)
	if pg.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find column mapping: %w", err)
	}
	m := &SavedMapping{SavedAt: row.UpdatedAt}
	if err := json.Unmarshal(row.Columns, &m.Columns); err != nil {
		return nil, fmt.Errorf("find column mapping: %w", err)
	}
	return m, nil
}
