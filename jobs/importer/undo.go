package importer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/customers"
)

// UndoType is the task type that undoes a customer import (POST /api/v1/tasks/{id}/undo).
const UndoType = "import:customers-undo"

// UndoParams are an undo's parameters, set by the server from the import it undoes.
type UndoParams struct {
	Import   string `json:"import"`    // the import's task number
	ImportID int64  `json:"import_id"` // its row id, which its before-images carry
	Filename string `json:"filename"`  // the import's file, for the title
}

// TitleMessage implements jobs.Titled: the file of the import it undoes.
func (p *UndoParams) TitleMessage() msg.Message {
	return msg.New("title.import_undo", "filename", p.Filename)
}

// Prepare implements jobs.Params: an undo's parameters are the server's, never a client's.
func (*UndoParams) Prepare(jobs.Who) error { return nil }

// UndoRefused is an undo the import does not allow. Gone: the import can no longer be undone
// (its before-image has expired); otherwise the import is not one an undo applies to.
type UndoRefused struct {
	Code, Message string
	Gone          bool
}

func (e *UndoRefused) Error() string { return e.Message }

// UndoSubmission is the submission of an undo of imp, or an *UndoRefused saying why there
// is none: an undo cannot be undone, a dry run wrote nothing, an import that has not ended
// with its rows written (SUCCESS or PARTIAL_SUCCESS) is not undone, and one that ended
// longer ago than keep has lost its before-image. The undo belongs to the import's owner and
// its biz key is the import's: asking again gives back the same undo task (which a retry
// resumes if it failed), never a second one.
func UndoSubmission(imp *store.Task, keep time.Duration, now time.Time) (jobs.Submission, error) {
	p, err := undoable(imp, keep, now)
	if err != nil {
		return jobs.Submission{}, err
	}
	up := UndoParams{Import: imp.TaskNo, ImportID: imp.ID, Filename: p.Filename}
	params, err := json.Marshal(up)
	if err != nil {
		return jobs.Submission{}, err
	}
	title := jobs.NewTitle(up.TitleMessage())
	return jobs.Submission{Type: UndoType, Owner: imp.Owner, BizKey: "undo:" + imp.TaskNo, Params: params, Title: title.Text,
		TitleMessage: title.Message}, nil
}

// CanUndo reports whether an undo of t is offered: t is an import an undo applies to (its
// before-image may still have expired: the undo then answers so).
func CanUndo(t *store.Task) bool {
	_, err := undoable(t, time.Duration(1<<63-1), time.Now())
	return err == nil
}

// undoable is the one rule of what can be undone: imp's parameters, or an *UndoRefused.
func undoable(imp *store.Task, keep time.Duration, now time.Time) (Params, error) {
	switch imp.Type {
	case UndoType:
		return Params{}, &UndoRefused{Code: "undo_of_undo", Message: "an undo cannot be undone; import the file again"}
	case Type:
	default:
		return Params{}, &UndoRefused{Code: "not_an_import", Message: "only a customer import can be undone; this task is " + imp.Type}
	}
	var p Params
	if len(imp.Params) > 0 {
		if err := json.Unmarshal(imp.Params, &p); err != nil {
			return p, fmt.Errorf("read the import's parameters: %w", err)
		}
	}
	switch {
	case p.DryRun:
		return p, &UndoRefused{Code: "undo_of_dry_run", Message: "a dry run wrote nothing, so there is nothing to undo"}
	case imp.Status != store.StatusSuccess && imp.Status != store.StatusPartialSuccess:
		return p, &UndoRefused{Code: "import_not_finished",
			Message: fmt.Sprintf("only an import that ended SUCCESS or PARTIAL_SUCCESS can be undone; this one is %s", imp.Status)}
	case imp.FinishedAt == nil || now.After(imp.FinishedAt.Add(keep)):
		return p, &UndoRefused{Code: "undo_expired", Gone: true,
			Message: fmt.Sprintf("the import can no longer be undone: what it changed is kept for %s after it ends", keep)}
	}
	return p, nil
}

// Undoer is the import:customers-undo handler: it restores, batch by batch, every customer an
// import changed from the import's before-images (customers.Undo), each batch committed with
// its checkpoint (the last code done), fenced by the attempt, so it resumes exactly and a
// cancel leaves every batch whole. A customer changed again since the import is left as it
// is and reported as a rejected row with the reason, in the undo's own error report.
type Undoer struct{ writer }

// NewUndoer returns the undo handler.
func NewUndoer(st *store.Store, fs storage.Store, cfg Config) *Undoer {
	return &Undoer{writer{store: st, files: fs, cfg: cfg}}
}

// Type implements jobs.Handler.
func (u *Undoer) Type() string { return UndoType }

// undoCheckpoint is where a resumed undo starts: after the code After.
type undoCheckpoint struct {
	After string `json:"after"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"` // the import's before-images, counted by the first batch
}

// undoHeader is the header of an undo's error report: the customer as it is now.
var undoHeader = []string{"code", "name", "phone", "email", "city", "level"}

// Run implements jobs.Handler.
func (u *Undoer) Run(ctx context.Context, run *jobs.Run) (jobs.Result, error) {
	var p UndoParams
	if err := run.Params(&p); err != nil {
		return jobs.Result{}, err
	}
	imp, err := u.store.GetByID(ctx, p.ImportID)
	if errors.Is(err, store.ErrNotFound) {
		return jobs.Result{}, jobs.BadInput("import_gone", "the import %s is no longer kept; it cannot be undone", p.Import)
	}
	if err != nil {
		return jobs.Result{}, err
	}
	if imp.FinishedAt == nil {
		return jobs.Result{}, jobs.BadInput("import_not_finished", "the import %s is %s again; an undo needs it finished", p.Import, imp.Status)
	}
	cp, err := readCheckpoint[undoCheckpoint](run.Task.Checkpoint)
	if err != nil {
		return jobs.Result{}, err
	}
	batchSize := max(u.cfg.BatchSize, 1)
	batches := 0
	for {
		next := cp
		err := run.CommitBatch(ctx, func(ctx context.Context, tx bun.Tx) (store.Batch, error) {
			if cp.After == "" && cp.Total == 0 {
				n, err := customers.ImagesToUndo(ctx, tx, p.ImportID)
				if err != nil {
					return store.Batch{}, err
				}
				next.Total = n
			}
			done, err := customers.Undo(ctx, tx, p.ImportID, *imp.FinishedAt, cp.After, batchSize)
			if err != nil || done.Last == "" {
				return store.Batch{Checkpoint: mustJSON(next), ProgressCurrent: cp.Done, ProgressTotal: max(next.Total, cp.Done)}, err
			}
			items := make([]store.Item, len(done.Conflicts))
			for i, c := range done.Conflicts {
				why := msgChangedSince
				switch c.Kind {
				case customers.DeletedSince:
					why = msgDeletedSince
				case customers.AddedSince:
					why = msgAddedSince
				}
				raw := c.Now
				if raw == nil {
					raw = []string{c.Code}
				}
				items[i] = item(c.Row, []task.FieldMessage{why.of("code", c.Code)}, raw)
				items[i].TaskID = run.Task.ID
			}
			if err := store.InsertItems(ctx, tx, items); err != nil {
				return store.Batch{}, err
			}
			n := int64(done.Restored + len(done.Conflicts))
			next.After, next.Done = done.Last, cp.Done+n
			return store.Batch{Checkpoint: mustJSON(next), TotalDelta: n, SuccessDelta: int64(done.Restored), FailedDelta: int64(len(done.Conflicts)),
				ProgressCurrent: next.Done, ProgressTotal: max(next.Total, next.Done)}, nil
		})
		if err == nil || errors.Is(err, jobs.ErrCancelRequested) {
			batches++
			if u.afterCommit != nil {
				u.afterCommit(ctx, run, batches)
			}
		}
		if err != nil {
			return jobs.Result{}, err
		}
		if next.After == cp.After {
			break
		}
		cp = next
	}
	return u.finish(ctx, run, p)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// finish reads the undo's counts, writes its error report when customers were left alone,
// and decides its status like an import's.
func (u *Undoer) finish(ctx context.Context, run *jobs.Run, p UndoParams) (jobs.Result, error) {
	row, err := u.finalRow(ctx, run)
	if err != nil {
		return jobs.Result{}, err
	}
	counts := task.Counts{Total: row.TotalCount, Success: row.SuccessCount, Failed: row.FailedCount}
	data := ResultData{Summary: Summary{Total: counts.Total, Success: counts.Success, Failed: counts.Failed}, Undoes: p.Import}
	status, _ := task.Outcome(counts, false)
	if status == store.StatusFailed {
		status = store.StatusPartialSuccess // a conflict is the undo's answer, not its failure
	}
	res := jobs.Result{Status: status, Data: &data, Counts: &counts,
		Log: msg.New("log.undone", "import", p.Import, "success", itoa(counts.Success), "failed", itoa(counts.Failed))}
	if counts.Total == 0 {
		res.Log = msg.New("log.undone_nothing", "import", p.Import)
	}
	if counts.Failed == 0 {
		return res, nil
	}
	return u.withReport(ctx, run, res, &data, "conflicts", undoHeader, LangEN)
}

// UndoTaskType declares import:customers-undo, on the imports' queue. It is submitted by
// POST /api/v1/tasks/{id}/undo, not through the generic submit.
func UndoTaskType(st *store.Store, fs storage.Store, cfg Config) jobs.Type {
	return importsType(NewUndoer(st, fs, cfg), "Undo a customer import: restore what it changed (POST /api/v1/tasks/{id}/undo).",
		"POST /api/v1/tasks/{id}/undo", func() jobs.Params { return &UndoParams{} })
}
