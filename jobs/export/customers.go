package export

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/files"
	"github.com/taskcenter/taskcenter/jobs"
)

// CustomersType is the task type of the customer export.
const CustomersType = "export:customers"

// CustomerFilter narrows a customer export. Empty fields match everything.
type CustomerFilter struct {
	City       string `json:"city,omitempty"`
	Level      string `json:"level,omitempty"`
	CodePrefix string `json:"code_prefix,omitempty"`
}

// CustomerParams are the task parameters of export:customers.
type CustomerParams struct {
	Filter CustomerFilter `json:"filter"`
}

// Validate checks a filter before a task is created for it.
func (f CustomerFilter) Validate() error {
	for name, v := range map[string]string{"city": f.City, "level": f.Level, "code_prefix": f.CodePrefix} {
		if utf8.RuneCountInString(v) > 64 {
			return jobs.BadInput("bad_filter", "filter.%s must be at most 64 characters", name)
		}
	}
	return nil
}

// Customers is the export:customers handler.
type Customers struct{ exporter }

// NewCustomers returns the customer export handler.
func NewCustomers(db *bun.DB, fs *files.Store, cfg Config) *Customers {
	return &Customers{exporter{db: db, files: fs, cfg: cfg}}
}

// Type implements jobs.Handler.
func (c *Customers) Type() string { return CustomersType }

// Run implements jobs.Handler.
func (c *Customers) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	var p CustomerParams
	if err := run.Params(&p); err != nil {
		return jobs.Result{}, err
	}
	if err := p.Filter.Validate(); err != nil {
		return jobs.Result{}, err
	}
	return c.export(ctx, run, customerSource{p.Filter}, downloadName("customers", run.Task.TaskNo))
}

type customerRow struct {
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

type customerSource struct{ f CustomerFilter }

func (customerSource) header() []string {
	return []string{"code", "name", "phone", "email", "city", "level", "created_at", "updated_at"}
}

func (s customerSource) where(q *bun.SelectQuery) *bun.SelectQuery {
	if s.f.City != "" {
		q = q.Where("city = ?", s.f.City)
	}
	if s.f.Level != "" {
		q = q.Where("level = ?", s.f.Level)
	}
	if s.f.CodePrefix != "" {
		q = q.Where("code LIKE ? ESCAPE '\\'", escapeLike(s.f.CodePrefix)+"%")
	}
	return q
}

func (s customerSource) count(ctx context.Context, tx bun.Tx) (int64, error) {
	n, err := s.where(tx.NewSelect().Table("customers")).Count(ctx)
	return int64(n), err
}

func (s customerSource) page(ctx context.Context, tx bun.Tx, after int64, limit int) ([][]any, int64, error) {
	var rows []customerRow
	err := s.where(tx.NewSelect().Table("customers").
		Column("id", "code", "name", "phone", "email", "city", "level", "created_at", "updated_at").
		Where("id > ?", after)).OrderExpr("id").Limit(int64(limit)).Scan(ctx, &rows)
	if err != nil || len(rows) == 0 {
		return nil, after, err
	}
	out := make([][]any, len(rows))
	for i, r := range rows {
		out[i] = []any{r.Code, r.Name, r.Phone, r.Email, r.City, r.Level, timeCell(&r.CreatedAt), timeCell(&r.UpdatedAt)}
	}
	return out, rows[len(rows)-1].ID, nil
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
