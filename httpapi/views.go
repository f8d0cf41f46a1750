package httpapi

import (
	"encoding/json"
	"time"

	"github.com/taskcenter/taskcenter/internal/task"
	"github.com/taskcenter/taskcenter/jobs"
	"github.com/taskcenter/taskcenter/jobs/importer"
	"github.com/taskcenter/taskcenter/store"
)

// TaskView is a task as the API shows it.
type TaskView struct {
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Title           string          `json:"title"`
	Owner           string          `json:"owner"`
	Status          store.Status    `json:"status"`
	Queue           string          `json:"queue"`
	Params          json.RawMessage `json:"params"`
	Progress        jobs.Progress   `json:"progress"`
	Counts          Counts          `json:"counts"`
	Attempt         int             `json:"attempt"`
	RetryCount      int             `json:"retry_count"`
	MaxRetry        int             `json:"max_retry"`
	NextRetryAt     *time.Time      `json:"next_retry_at"`
	CancelRequested bool            `json:"cancel_requested"`
	Error           *ErrorView      `json:"error"`
	Result          *ResultView     `json:"result"`
	CreatedAt       time.Time       `json:"created_at"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	Links           Links           `json:"links"`
}

// Counts are the rows a task has handled (internal/task).
type Counts = task.Counts

// ErrorView is why a task failed (or why its last attempt did).
type ErrorView struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ResultView describes a task's result file and summary.
type ResultView struct {
	Name        string          `json:"name,omitempty"`
	Rows        int64           `json:"rows,omitempty"`
	Size        int64           `json:"size,omitempty"`
	ContentType string          `json:"content_type,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
	Expired     bool            `json:"expired"`
	Summary     json.RawMessage `json:"summary,omitempty"`
	// FirstErrors are an import's first rejected rows, e.g. "row 128, phone: must be …".
	FirstErrors []string `json:"first_errors,omitempty"`
}

// Links are the actions available on a task now.
type Links struct {
	Self        string `json:"self"`
	Result      string `json:"result,omitempty"`
	ErrorReport string `json:"error_report,omitempty"`
	Cancel      string `json:"cancel,omitempty"`
	Retry       string `json:"retry,omitempty"`
}

// DetailView is a task with its attempts and recent log.
type DetailView struct {
	TaskView
	// Archived: retention moved the task to the archive; it is kept for the record only.
	Archived bool          `json:"archived,omitempty"`
	Attempts []AttemptView `json:"attempts"`
	Logs     []LogView     `json:"logs"`
	// CancelledBy is who cancelled the task (or asked to) and when, from the audit trail.
	CancelledBy *ActorView `json:"cancelled_by,omitempty"`
}

// AttemptView is one execution attempt.
type AttemptView struct {
	Attempt    int        `json:"attempt"`
	Trigger    string     `json:"trigger"`
	Worker     string     `json:"worker"`
	Status     string     `json:"status"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// LogView is one line of the task log.
type LogView struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
}

// resultFile is the part of a task result the API reads: where the files are and the
// summary. Cleanup's expiry drops file and error_report and sets expired.
type resultFile struct {
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
	ErrorReportLang string          `json:"error_report_lang"`
}

// firstErrorsIn puts an import's first rejected rows (stored in English) into the task's
// language: the one its uploader asked for, as the error report is.
func firstErrorsIn(t *store.Task, fe []string) []string {
	if len(fe) == 0 {
		return fe
	}
	var p struct {
		Lang string `json:"lang"`
	}
	json.Unmarshal(t.Params, &p) //nolint:errcheck // no language: English
	lang := importer.ParseLang(p.Lang)
	if lang == importer.LangEN {
		return fe
	}
	out := make([]string, len(fe))
	for i, m := range fe {
		out[i] = importer.TranslateRowError(m, lang)
	}
	return out
}

func parseResult(t *store.Task) (resultFile, bool) {
	var r resultFile
	if len(t.Result) == 0 || json.Unmarshal(t.Result, &r) != nil {
		return resultFile{}, false
	}
	return r, true
}

// hadFile reports whether the task has, or had before it expired, a result file: the
// download name outlives the file.
func (r resultFile) hadFile() bool { return r.File != "" || r.Name != "" }

// hadReport reports whether the task has, or had before it expired, an error report.
func (r resultFile) hadReport() bool { return r.ErrorReport != "" || r.ErrorReportName != "" }

// expired reports whether the task's files may no longer be downloaded: past
// result_expires_at, or already removed by cleanup.
func (r resultFile) expired(t *store.Task, now time.Time) bool {
	return r.Expired || (t.ResultExpiresAt != nil && !now.Before(*t.ResultExpiresAt))
}

// taskView renders t; live is the Redis progress when there is one.
func taskView(t *store.Task, live *jobs.Progress, now time.Time) TaskView {
	self := "/api/v1/tasks/" + t.TaskNo
	v := TaskView{
		ID: t.TaskNo, Type: t.Type, Title: t.Title, Owner: t.Owner, Status: t.Status, Queue: t.Queue, Params: t.Params,
		Counts:  Counts{Total: t.TotalCount, Success: t.SuccessCount, Failed: t.FailedCount},
		Attempt: t.Attempt, RetryCount: t.RetryCount, MaxRetry: t.MaxRetry, NextRetryAt: utc(t.NextRetryAt),
		CancelRequested: t.CancelRequested, CreatedAt: t.CreatedAt.UTC(), StartedAt: utc(t.StartedAt),
		FinishedAt: utc(t.FinishedAt), UpdatedAt: t.UpdatedAt.UTC(), Links: Links{Self: self},
	}
	// Work that ran to the end shows 100 %, whatever its outcome (an import whose every row
	// was rejected read the whole file).
	finished := t.Status.Succeeded() || (t.Status.Terminal() && t.ProgressTotal > 0 && t.ProgressCurrent >= t.ProgressTotal)
	v.Progress = jobs.Progress{Current: t.ProgressCurrent, Total: t.ProgressTotal,
		Percent: jobs.Percent(t.ProgressCurrent, t.ProgressTotal, finished), UpdatedAt: t.UpdatedAt.UTC()}
	if live != nil && t.Status == store.StatusRunning && live.Current >= t.ProgressCurrent {
		v.Progress = *live
	}
	if t.ErrorCode != "" || t.ErrorMessage != "" {
		v.Error = &ErrorView{Code: t.ErrorCode, Message: t.ErrorMessage}
	}
	if r, ok := parseResult(t); ok {
		rv := &ResultView{Name: r.Name, Rows: r.Rows, Size: r.Size, ContentType: r.ContentType,
			ExpiresAt: utc(t.ResultExpiresAt), Expired: r.expired(t, now), Summary: r.Summary, FirstErrors: firstErrorsIn(t, r.FirstErrors)}
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
	if v.Params == nil {
		v.Params = json.RawMessage(`{}`)
	}
	return v
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
