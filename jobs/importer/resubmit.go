package importer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/sheet"
	"github.com/taskcenter/taskcenter/internal/storage"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/store"
	"github.com/taskcenter/taskcenter/store/webhooks"
)

// Resubmit is a re-submit of an earlier import, FromTask: its upload is imported again with
// these choices over the earlier task's. A nil field keeps the earlier choice; Columns
// non-nil replaces the mapping (empty: none). Notify subscribes a webhook to the new task,
// as with an upload.
type Resubmit struct {
	FromTask                    string
	Columns                     map[string]string
	Mode, Sheet, Encoding, Lang *string
	DryRun                      *bool
	Notify                      webhooks.Notify
}

// Resubmit imports the stored upload of the import task r.FromTask again, for owner, with
// r's choices over that task's: no new upload. The task must be one scope sees, live or
// archived (another user's is store.ErrNotFound, as reading it is). The upload is kept for
// the upload TTL from now; one already swept is a FileProblem of kind Gone (upload_missing).
// ctx bounds the checks (the request's).
func (u *Uploads) Resubmit(ctx context.Context, owner string, scope store.Scope, requestID string, r Resubmit) (jobs.SubmitResult, error) {
	ns, err := u.checkNotify(ctx, r.Notify, owner)
	if err != nil {
		return jobs.SubmitResult{}, err
	}
	qctx, cancel := context.WithTimeout(ctx, cmp.Or(u.queryTimeout, recordTimeout))
	from, err := u.store.Get(qctx, r.FromTask, scope)
	if errors.Is(err, store.ErrNotFound) {
		from, err = u.store.GetArchived(qctx, r.FromTask, scope)
	}
	cancel()
	if err != nil {
		return jobs.SubmitResult{}, err
	}
	sub, err := u.resubmission(ctx, from, owner, r)
	if err != nil {
		return jobs.SubmitResult{}, err
	}
	return u.submit(ctx, sub, ns, requestID)
}

// resubmission is the submission that imports from's upload again with r's choices.
func (u *Uploads) resubmission(ctx context.Context, from *store.Task, owner string, r Resubmit) (jobs.Submission, error) {
	if from.Type != Type {
		return jobs.Submission{}, &FileProblem{Kind: Invalid, Code: "not_an_import", Field: "from_task",
			Message:      fmt.Sprintf("task %s is %s, not an import; re-submit an import task", from.TaskNo, from.Type),
			FieldMessage: msg.New("field_error.not_an_import")}
	}
	var p Params
	if err := json.Unmarshal(from.Params, &p); err != nil || p.Upload == "" {
		return jobs.Submission{}, uploadMissing(from.TaskNo)
	}
	o := Submit{Mode: p.Mode, Sheet: p.Sheet, Encoding: string(p.Encoding), Lang: p.Lang, Columns: p.Columns, DryRun: p.DryRun}
	for name, v := range map[string]*string{"mode": r.Mode, "sheet": r.Sheet, "encoding": r.Encoding, "lang": r.Lang} {
		if v != nil {
			if err := o.Set(name, *v); err != nil {
				return jobs.Submission{}, err
			}
		}
	}
	if r.Columns != nil {
		o.Columns = r.Columns
	}
	if r.DryRun != nil {
		o.DryRun = *r.DryRun
	}
	enc, err := checkChoice(o)
	if err != nil {
		return jobs.Submission{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, recordTimeout)
	kept, err := u.store.TouchUpload(rctx, p.Upload)
	cancel()
	if err != nil {
		return jobs.Submission{}, err
	}
	if !kept {
		return jobs.Submission{}, uploadMissing(from.TaskNo)
	}
	ins, err := u.inspect(ctx, p.Upload, sheet.Choice{Format: p.Format, Sheet: o.Sheet, Encoding: enc}, o.Columns)
	if errors.Is(err, storage.ErrNotExist) {
		return jobs.Submission{}, uploadMissing(from.TaskNo)
	}
	if err != nil {
		return jobs.Submission{}, fileProblem(err)
	}
	if err := u.checkHeader(ctx, p.Upload, ins, o.Columns); err != nil {
		return jobs.Submission{}, err
	}
	return submission(owner, Params{Upload: p.Upload, Filename: p.Filename, Size: p.Size, SHA256: p.SHA256}, ins, o)
}

func uploadMissing(taskNo string) *FileProblem {
	return &FileProblem{Kind: Gone, Code: "upload_missing",
		Message: fmt.Sprintf("the file of task %s is no longer kept; upload the file again", taskNo)}
}
