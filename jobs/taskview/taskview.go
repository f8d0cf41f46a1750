// Package taskview renders a task row into the one view every surface shows (internal/task
// View): the API's JSON and live events, the page and CLI that read them, and webhook payloads.
// It also answers what the row says of its files, for the downloads.
package taskview

import (
	"encoding/json"
	"time"

	"github.com/taskcenter/taskcenter/internal/msg"
	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/store"
)

// Files is the part of a task result the API reads: where the files are and the
// summary. Cleanup's expiry drops file and error_report and sets expired.
type Files struct {
	File            string          `json:"file"`
	Name            string          `json:"name"`
	Rows            int64           `json:"rows"`
	Size            int64           `json:"size"`
	ContentType     string          `json:"content_type"`
	ErrorReport     string          `json:"error_report"`
	ErrorReportName string          `json:"error_report_name"`
	Expired         bool            `json:"expired"`
	Summary         json.RawMessage `json:"summary"`
	FirstErrors     []string        `json:"first_errors"`
	// FirstErrorMessages are FirstErrors as catalogue messages (results written before they
	// were kept have none).
	FirstErrorMessages []task.RowMessage `json:"first_error_messages"`
	ErrorReportLang    string            `json:"error_report_lang"`
	// ErrorDetails are a failed task's structured error details (error.details), the whole
	// result of a task that failed before it had any other.
	ErrorDetails   json.RawMessage `json:"error_details"`
	DryRun         bool            `json:"dry_run"`
	NothingRemoved string          `json:"nothing_removed"`
	// NothingRemovedMessage is NothingRemoved as a catalogue message (results written
	// before it was kept have none).
	NothingRemovedMessage *msg.Message `json:"nothing_removed_message"`
}

// detailsOnly reports whether the result holds nothing but error details.
func (r Files) detailsOnly() bool {
	return len(r.ErrorDetails) > 0 && !r.HadFile() && !r.HadReport() && len(r.Summary) == 0 && !r.Expired
}

// firstErrorsIn puts an import's first rejected rows (stored in English) into the task's
// language: the one its uploader asked for, as the error report is.
func firstErrorsIn(t *store.Task, r Files) []string {
	if len(r.FirstErrors) == 0 {
		return r.FirstErrors
	}
	var p struct {
		Lang string `json:"lang"`
	}
	json.Unmarshal(t.Params, &p) //nolint:errcheck // no language: English
	lang := importer.ParseLang(p.Lang)
	if lang == importer.LangEN {
		return r.FirstErrors
	}
	out := make([]string, len(r.FirstErrors))
	for i, m := range firstErrorMessages(r) {
		out[i] = m.In(lang)
	}
	return out
}

// firstErrorMessages are an import's first rejected rows as catalogue messages: as the
// result keeps them, or, for a result written before it kept them, read back from the
// English (importer.ParseRowError).
func firstErrorMessages(r Files) []task.RowMessage {
	if len(r.FirstErrors) == 0 {
		return nil
	}
	if len(r.FirstErrorMessages) == len(r.FirstErrors) {
		return r.FirstErrorMessages
	}
	out := make([]task.RowMessage, len(r.FirstErrors))
	for i, m := range r.FirstErrors {
		out[i] = importer.ParseRowError(m)
	}
	return out
}

// FilesOf reads what t's result says of its files; false when it has no result.
func FilesOf(t *store.Task) (Files, bool) {
	var r Files
	if len(t.Result) == 0 || json.Unmarshal(t.Result, &r) != nil {
		return Files{}, false
	}
	return r, true
}

// HadFile reports whether the task has, or had before it expired, a result file: the
// download name outlives the file.
func (r Files) HadFile() bool { return r.File != "" || r.Name != "" }

// HadReport reports whether the task has, or had before it expired, an error report.
func (r Files) HadReport() bool { return r.ErrorReport != "" || r.ErrorReportName != "" }

// IsExpired reports whether the task's files may no longer be downloaded: past
// result_expires_at, or already removed by cleanup.
func (r Files) IsExpired(t *store.Task, now time.Time) bool {
	return r.Expired || (t.ResultExpiresAt != nil && !now.Before(*t.ResultExpiresAt))
}

// Of renders t as of now for a reader of lang; live is the running task's progress from
// Redis when there is one. Live progress ahead of the row comes with its own counts, so a
// view never shows progress from one batch beside counts from an older one.
func Of(t *store.Task, live *task.Live, now time.Time, lang msg.Lang) task.View {
	self := "/api/v1/tasks/" + t.TaskNo
	v := task.View{
		ID: t.TaskNo, Type: t.Type, Title: TitleIn(t, lang), TitleMessage: t.TitleMessage(), Owner: t.Owner, Status: t.Status,
		Queue: t.Queue, Params: t.Params,
		Counts:  task.Counts{Total: t.TotalCount, Success: t.SuccessCount, Failed: t.FailedCount},
		Attempt: t.Attempt, RetryCount: t.RetryCount, MaxRetry: t.MaxRetry, NextRetryAt: UTC(t.NextRetryAt),
		CancelRequested: t.CancelRequested, CreatedAt: t.CreatedAt.UTC(), StartedAt: UTC(t.StartedAt),
		FinishedAt: UTC(t.FinishedAt), UpdatedAt: t.UpdatedAt.UTC(), Links: task.Links{Self: self},
	}
	// Work that ran to the end shows 100 %, whatever its outcome (an import whose every row
	// was rejected read the whole file).
	finished := t.Status.Succeeded() || (t.Status.Terminal() && t.ProgressTotal > 0 && t.ProgressCurrent >= t.ProgressTotal)
	v.Progress = task.Progress{Current: t.ProgressCurrent, Total: t.ProgressTotal,
		Percent: task.Percent(t.ProgressCurrent, t.ProgressTotal, finished), UpdatedAt: t.UpdatedAt.UTC()}
	if live != nil && t.Status == store.StatusRunning && live.Progress.Current >= t.ProgressCurrent {
		v.Progress = live.Progress
		if live.Counts != nil && live.Counts.Total >= v.Counts.Total {
			v.Counts = *live.Counts
		}
	}
	if t.Status == store.StatusRunning {
		// The speed runs from the first progress published since the task last started; a
		// view without it counts from the task's start at zero.
		var from task.Sample
		switch {
		case live != nil && live.First != nil:
			from = *live.First
		case t.StartedAt != nil:
			from = task.Sample{At: *t.StartedAt}
		}
		if !from.At.IsZero() {
			v.Progress.RatePerS, v.Progress.ETA = task.Speed(from, task.Sample{Current: v.Progress.Current, At: v.Progress.UpdatedAt}, v.Progress.Total)
		}
	}
	if t.ErrorCode != "" || t.ErrorMessage != "" {
		v.Error = &task.ErrorView{Code: t.ErrorCode, Message: t.ErrorMessage, Params: t.ErrorParams}
	}
	r, ok := FilesOf(t)
	if ok && v.Error != nil && len(r.ErrorDetails) > 0 {
		v.Error.Details = r.ErrorDetails
	}
	if ok && !r.detailsOnly() {
		rv := &task.ResultView{Name: r.Name, Rows: r.Rows, Size: r.Size, ContentType: r.ContentType,
			ExpiresAt: UTC(t.ResultExpiresAt), Expired: r.IsExpired(t, now), Summary: r.Summary, FirstErrors: firstErrorsIn(t, r),
			DryRun: r.DryRun, NothingRemoved: r.NothingRemoved, NothingRemovedMessage: r.NothingRemovedMessage, FirstErrorMessages: firstErrorMessages(r)}
		v.Result = rv
		if r.File != "" && !rv.Expired {
			v.Links.Result = self + "/result"
		}
		if r.ErrorReport != "" && !rv.Expired {
			v.Links.ErrorReport = self + "/error-report"
		}
	}
	switch {
	case t.Status.Waiting() || (t.Status == store.StatusRunning && !t.CancelRequested):
		v.Links.Cancel = self + "/cancel"
	case task.CanRetry(t.Status, t.ErrorCode):
		v.Links.Retry = self + "/retry"
	}
	if importer.CanUndo(t) {
		v.Links.Undo = self + "/undo"
	}
	if v.Params == nil {
		v.Params = json.RawMessage(`{}`)
	}
	return v
}

// TitleIn is t's title in lang: the product's title rendered from its message, or the
// stored text (a submitter's own title; the product's in English, as it was stored).
func TitleIn(t *store.Task, lang msg.Lang) string {
	if m := t.TitleMessage(); m != nil && lang != msg.EN {
		return task.TitleText(m.In(lang))
	}
	return t.Title
}

// UTC is t in UTC, nil for nil.
func UTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
