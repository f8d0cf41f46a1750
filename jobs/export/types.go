package export

import (
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
)

// defaultPolicy is both exports' retry and timeout defaults.
var defaultPolicy = jobs.Policy{MaxRetry: 3, RetryBase: 30 * time.Second, Timeout: 30 * time.Minute, MaxRuntime: 6 * time.Hour,
	StallAfter: 10 * time.Minute}

// CustomersTaskType declares export:customers.
func CustomersTaskType(db *bun.DB, fs storage.Store, cfg Config) jobs.Type {
	return taskType(NewCustomers(db, fs, cfg), "Export customers, optionally filtered by city, level or code prefix, to an .xlsx file.")
}

// TasksTaskType declares export:tasks.
func TasksTaskType(db *bun.DB, fs storage.Store, cfg Config) jobs.Type {
	return taskType(NewTasks(db, fs, cfg), "Export your task list (an admin: everyone's, or one owner's), filtered like the list API, to an .xlsx file.")
}

// taskType declares the export h runs: both exports share their queue and policy.
func taskType[P any, PP interface {
	*P
	jobs.Params
}](h *handler[P], description string) jobs.Type {
	return jobs.Type{
		Name: h.name, Description: description, Queue: "exports", Submittable: true, Policy: defaultPolicy,
		NewParams: func() jobs.Params { return PP(new(P)) },
		Handler:   h,
	}
}

// TitleMessage implements jobs.Titled: the filter's city, level and code prefix, when set
// ("Customers in Shanghai, level gold", "客户导出：Shanghai，黄金").
func (p *CustomerParams) TitleMessage() msg.Message {
	f := p.Filter
	return clauses("title.export_customers", "city", f.City, "level", f.Level, "code_prefix", f.CodePrefix)
}

// TitleMessage implements jobs.Titled: the filter's owner and statuses, when set ("Tasks of
// alice, status Failed, Timed out", "任务列表导出：alice，状态为失败、超时"). The statuses read
// as a filter, in words, so the title never reads as the export's own status beside its chip.
func (p *TaskParams) TitleMessage() msg.Message {
	statuses := make([]string, len(p.Filter.Statuses))
	for i, s := range p.Filter.Statuses {
		statuses[i] = string(s)
	}
	return clauses("title.export_tasks", "owner", p.Filter.Owner, "statuses", strings.Join(statuses, " "))
}

// clauses is the title message code with its optional clauses, given as name, value pairs:
// each value, its spaces collapsed as a title's are, is the param name, and name_part says
// whether the title says the clause: "" when the value is empty, "first" for the first one
// said, "next" for the others.
func clauses(code string, nameValues ...string) msg.Message {
	m := msg.Message{Code: code, Params: msg.Params{}}
	part := "first"
	for i := 0; i+1 < len(nameValues); i += 2 {
		name, v := nameValues[i], nameValues[i+1]
		m.Params[name], m.Params[name+"_part"] = strings.Join(strings.Fields(v), " "), ""
		if v != "" {
			m.Params[name+"_part"], part = part, "next"
		}
	}
	return m
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
