package export

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/store/customers"
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
	// Lang is the file's language: "zh" writes its headers, sheet name and levels in
	// Chinese, anything else in English.
	Lang string `json:"lang,omitempty"`
}

// Customers is the export:customers handler.
type Customers = handler[CustomerParams]

// NewCustomers returns the customer export handler.
func NewCustomers(db *bun.DB, fs storage.Store, cfg Config) *Customers {
	return &Customers{exporter: exporter{db: db, files: fs, cfg: cfg}, name: CustomersType, file: "customers", selected: CustomerParams.selected}
}

// selected is the source of the customers p selects, once p is valid.
func (p CustomerParams) selected(*bun.DB) (source, error) {
	if err := p.Filter.Validate(); err != nil {
		return nil, err
	}
	return customerSource{f: p.Filter, lang: msg.ParseLang(p.Lang)}, nil
}

type customerSource struct {
	f    CustomerFilter
	lang msg.Lang
}

func (s customerSource) language() msg.Lang { return s.lang }

func (s customerSource) header() []string {
	return headers(s.lang, "code", "name", "phone", "email", "city", "level", "created_at", "updated_at")
}

func (s customerSource) query() customers.Query {
	return customers.Query{City: s.f.City, Level: s.f.Level, CodePrefix: s.f.CodePrefix}
}

func (s customerSource) count(ctx context.Context, tx bun.Tx) (int64, error) {
	return customers.Count(ctx, tx, s.query())
}

func (s customerSource) page(ctx context.Context, tx bun.Tx, after int64, limit int) ([][]any, int64, error) {
	rows, err := customers.Page(ctx, tx, s.query(), after, limit)
	if err != nil || len(rows) == 0 {
		return nil, after, err
	}
	out := make([][]any, len(rows))
	for i, r := range rows {
		out[i] = []any{r.Code, r.Name, r.Phone, r.Email, r.City, enum(s.lang, "level", r.Level), timeCell(&r.CreatedAt), timeCell(&r.UpdatedAt)}
	}
	return out, rows[len(rows)-1].ID, nil
}
