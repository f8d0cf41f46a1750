package export

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/taskview"
	"github.com/taskcenter/taskcenter/store"
)

// TasksType is the task type of the task-list export.
const TasksType = "export:tasks"

// TaskParams are the task parameters of export:tasks. Scope is fixed at submit from the
// submitter's token: a user exports only their own tasks, an admin all (or one owner's).
type TaskParams struct {
	Filter TaskFilter  `json:"filter"`
	Scope  store.Scope `json:"scope" jsonschema:"-"` // filled at submit: not a client parameter
	// Lang is the file's language: "zh" writes its headers, sheet name, statuses, types and
	// errors in Chinese, anything else in English.
	Lang string `json:"lang,omitempty"`
}

// TaskFilter narrows a task export; the same filters as the task list API.
type TaskFilter struct {
	Statuses    []store.Status `json:"status,omitempty"`
	Types       []string       `json:"type,omitempty"`
	Owner       string         `json:"owner,omitempty"`
	CreatedFrom *time.Time     `json:"created_from,omitempty"`
	CreatedTo   *time.Time     `json:"created_to,omitempty"`
	// Search finds tasks by the start of their id, or part of their title or file name
	// (store.ListFilter.Search says how).
	Search string `json:"q,omitempty"`
}

// Tasks is the export:tasks handler.
type Tasks = handler[TaskParams]

// NewTasks returns the task-list export handler.
func NewTasks(db *bun.DB, fs storage.Store, cfg Config) *Tasks {
	return &Tasks{exporter: exporter{db: db, files: fs, cfg: cfg}, name: TasksType, file: "tasks", selected: TaskParams.selected}
}

// selected is the source of the tasks p selects, read from db, once p is valid.
func (p TaskParams) selected(db *bun.DB) (source, error) {
	if err := p.Filter.Validate(); err != nil {
		return nil, err
	}
	if !p.Scope.Admin && p.Scope.Owner == "" {
		return nil, jobs.BadInput("bad_params", "the export has no owner scope")
	}
	return taskSource{p: p, db: db, lang: msg.ParseLang(p.Lang)}, nil
}

type taskSource struct {
	p    TaskParams
	db   *bun.DB
	lang msg.Lang
}

func (s taskSource) language() msg.Lang { return s.lang }

func (s taskSource) header() []string {
	return headers(s.lang, "task_no", "type", "owner", "status", "progress_current", "progress_total", "total", "success", "failed",
		"attempts", "error", "created_at", "started_at", "finished_at", "title")
}

func (s taskSource) filter() store.ListFilter {
	return store.ListFilter{
		Statuses: s.p.Filter.Statuses, Types: s.p.Filter.Types, Owner: s.p.Filter.Owner,
		CreatedFrom: s.p.Filter.CreatedFrom, CreatedTo: s.p.Filter.CreatedTo, Search: s.p.Filter.Search,
	}
}

func (s taskSource) count(ctx context.Context, tx bun.Tx) (int64, error) {
	return store.CountTasks(ctx, tx, s.filter(), s.p.Scope)
}

func (s taskSource) page(ctx context.Context, tx bun.Tx, after int64, limit int) ([][]any, int64, error) {
	tasks, err := store.TaskPage(ctx, tx, s.db, s.filter(), s.p.Scope, after, limit)
	if err != nil || len(tasks) == 0 {
		return nil, after, err
	}
	// Each row is the task's view, the one every other surface shows.
	now := time.Now()
	out := make([][]any, len(tasks))
	for i := range tasks {
		v := taskview.Of(&tasks[i], nil, now, s.lang)
		var why string
		if v.Error != nil {
			why = errorText(s.lang, v.Error.Code, v.Error.Params, v.Error.Message)
		}
		out[i] = []any{v.ID, enum(s.lang, "type", v.Type), v.Owner, enum(s.lang, "status", string(v.Status)), v.Progress.Current,
			v.Progress.Total, v.Counts.Total, v.Counts.Success, v.Counts.Failed, v.Attempt, why, timeCell(&v.CreatedAt),
			timeCell(v.StartedAt), timeCell(v.FinishedAt), v.Title}
	}
	return out, tasks[len(tasks)-1].ID, nil
}
