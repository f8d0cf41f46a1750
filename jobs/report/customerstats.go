// Package report holds report task types: summaries computed in one consistent snapshot and
// written as a workbook with one sheet per breakdown, streamed like the exports.
package report

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/xlsxsafe"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/customers"
)

// CustomerStatsType is the task type of the customer statistics report.
const CustomerStatsType = "report:customer-stats"

// Config tunes reports.
type Config struct {
	// ResultTTL is how long a report can be downloaded.
	ResultTTL time.Duration
}

// CustomerStatsParams are the report's parameters.
type CustomerStatsParams struct {
	// Days is how many days back the imports-by-day sheet goes. Default 30, at most 366.
	Days int `json:"days,omitempty" jsonschema:"minimum=1,maximum=366,description=days back for the imports-by-day sheet (default 30)"`
	// Scope is fixed at submit: whose imports the report counts.
	Scope store.Scope `json:"scope" jsonschema:"-"` // filled at submit: not a client parameter
}

// TitleMessage implements jobs.Titled: the days the imports sheet goes back.
func (p *CustomerStatsParams) TitleMessage() msg.Message {
	return msg.New("title.customer_stats", "days", strconv.Itoa(p.Days))
}

// Prepare implements jobs.Params.
func (p *CustomerStatsParams) Prepare(who jobs.Who) error {
	if p.Days == 0 {
		p.Days = 30
	}
	if p.Days < 1 || p.Days > 366 {
		return jobs.BadInput("bad_params", "days must be from 1 to 366, got %d", p.Days)
	}
	p.Scope = store.Scope{Owner: who.User, Admin: who.Admin}
	return nil
}

// CustomerStatsTaskType declares report:customer-stats: customers counted by city and by
// level, and imports by day, one sheet each.
func CustomerStatsTaskType(db *bun.DB, fs storage.Store, cfg Config) jobs.Type {
	return jobs.Type{
		Name:        CustomerStatsType,
		Description: "Customers counted by city and by level, and imports by day, as an .xlsx with one sheet per breakdown.",
		Queue:       "exports", Submittable: true,
		NewParams: func() jobs.Params { return &CustomerStatsParams{} },
		Policy:    jobs.Policy{MaxRetry: 3, RetryBase: 30 * time.Second, Timeout: 30 * time.Minute, MaxRuntime: time.Hour, StallAfter: 10 * time.Minute},
		Handler:   &customerStats{db: db, files: fs, cfg: cfg},
	}
}

type customerStats struct {
	db    *bun.DB
	files storage.Store
	cfg   Config
}

// Type implements jobs.Handler.
func (*customerStats) Type() string { return CustomerStatsType }

// ResultData is the report's task result.
type ResultData struct {
	File        string `json:"file"`
	Name        string `json:"name"`
	Rows        int64  `json:"rows"`
	Size        int64  `json:"size"`
	ContentType string `json:"content_type"`
}

// Run implements jobs.Handler.
func (h *customerStats) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	var p CustomerStatsParams
	if err := run.Params(&p); err != nil {
		return jobs.Result{}, err
	}
	if p.Days < 1 || p.Days > 366 || (!p.Scope.Admin && p.Scope.Owner == "") {
		return jobs.Result{}, jobs.BadInput("bad_params", "the report's parameters are not valid")
	}
	tx, err := store.BeginSnapshot(ctx, h.db)
	if err != nil {
		return jobs.Result{}, fmt.Errorf("begin report snapshot: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	sheets := []struct {
		name   string
		header []string
		rows   func() ([][]any, error)
	}{
		{"By city", []string{"city", "customers"}, func() ([][]any, error) { return customers.By(ctx, tx, "city") }},
		{"By level", []string{"level", "customers"}, func() ([][]any, error) { return customers.By(ctx, tx, "level") }},
		{"Imports by day", []string{"day", "imports", "rows", "rows imported", "rows rejected"}, func() ([][]any, error) {
			return customers.ImportsByDay(ctx, tx, p.Scope, p.Days)
		}},
	}
	out, err := xlsxsafe.NewWriter(h.files, run.TempPrefix(), sheets[0].name, sheets[0].header)
	if err != nil {
		return jobs.Result{}, err
	}
	defer out.Close()
	var written int64
	for i, sh := range sheets {
		if i > 0 {
			if err := out.NextSheet(sh.name, sh.header); err != nil {
				return jobs.Result{}, err
			}
		}
		rows, err := sh.rows()
		if err != nil {
			return jobs.Result{}, fmt.Errorf("read %s: %w", sh.name, err)
		}
		for _, r := range rows {
			if err := out.Row(r); err != nil {
				return jobs.Result{}, err
			}
		}
		written += int64(len(rows))
		if err := run.Progress(ctx, int64(i+1), int64(len(sheets))); err != nil {
			return jobs.Result{}, err
		}
	}
	rel := storage.ResultKey(run.Task.TaskNo, run.Lease.Attempt, "", ".xlsx")
	size, err := out.Commit(ctx, rel)
	if err != nil {
		return jobs.Result{}, err
	}
	expires := time.Now().Add(h.cfg.ResultTTL).UTC()
	name := fmt.Sprintf("customer-stats-%s-%s.xlsx", time.Now().UTC().Format("20060102"), run.Task.TaskNo)
	return jobs.Result{
		Data: ResultData{File: rel, Name: name, Rows: written, Size: size,
			ContentType: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
		ExpiresAt: &expires, Log: msg.New("log.reported", "rows", strconv.FormatInt(written, 10), "sheets", strconv.Itoa(len(sheets))), Files: []string{rel},
	}, nil
}
