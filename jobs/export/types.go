package export

import (
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// defaultPolicy is both exports' retry and timeout defaults.
var defaultPolicy = jobs.Policy{MaxRetry: 3, RetryBase: 30 * time.Second, Timeout: 30 * time.Minute, MaxRuntime: 6 * time.Hour,
	StallAfter: 10 * time.Minute}

// CustomersTaskType declares export:customers.
func CustomersTaskType(db *bun.DB, fs storage.Store, cfg Config) jobs.Type {
	return jobs.Type{
		Name: CustomersType, Description: "Export customers, optionally filtered by city, level or code prefix, to an .xlsx file.",
		Queue: "exports", Submittable: true, Policy: defaultPolicy,
		NewParams: func() jobs.Params { return &CustomerParams{} },
		Title:     `Customers{{with .Filter.City}} in {{.}}{{end}}{{with .Filter.Level}}, level {{.}}{{end}}{{with .Filter.CodePrefix}}, codes {{.}}…{{end}}`,
		Handler:   NewCustomers(db, fs, cfg),
	}
}

// TasksTaskType declares export:tasks.
func TasksTaskType(db *bun.DB, fs storage.Store, cfg Config) jobs.Type {
	return jobs.Type{
		Name: TasksType, Description: "Export your task list (an admin: everyone's, or one owner's), filtered like the list API, to an .xlsx file.",
		Queue: "exports", Submittable: true, Policy: defaultPolicy,
		NewParams: func() jobs.Params { return &TaskParams{} },
		Title:     `Tasks{{with .Filter.Owner}} of {{.}}{{end}}{{range .Filter.Statuses}} {{.}}{{end}}`,
		Handler:   NewTasks(db, fs, cfg),
	}
}

// Prepare implements jobs.Params: the filter must be valid.
func (p *CustomerParams) Prepare(jobs.Who) error { return p.Filter.Validate() }

// Prepare implements jobs.Params: the filter must be valid, only an admin may name another
// owner, and the export's scope is fixed now from who submits it.
func (p *TaskParams) Prepare(who jobs.Who) error {
	if err := p.Filter.Validate(); err != nil {
		return err
	}
	if p.Filter.Owner != "" && !who.Admin && p.Filter.Owner != who.User {
		return jobs.BadInput("forbidden_owner", "filter.owner: only an admin can export other users' tasks")
	}
	p.Scope = store.Scope{Owner: who.User, Admin: who.Admin}
	return nil
}
