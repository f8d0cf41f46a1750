package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/taskcenter/taskcenter/internal/task"
)

// Status is a task's status.
type Status = task.Status

// Task statuses.
const (
	StatusPending        = task.StatusPending
	StatusRunning        = task.StatusRunning
	StatusRetryWait      = task.StatusRetryWait
	StatusSuccess        = task.StatusSuccess
	StatusPartialSuccess = task.StatusPartialSuccess
	StatusFailed         = task.StatusFailed
	StatusTimeout        = task.StatusTimeout
	StatusCancelled      = task.StatusCancelled
)

// Terminal reports whether a task in status has ended (only a manual retry moves it again).
func Terminal(status Status) bool { return status.Terminal() }

// Task is a task as the API shows it: the server's one task view, plus the attempts and logs
// that Get fills.
type Task struct {
	task.View
	Attempts []Attempt `json:"attempts,omitempty"`
	Logs     []LogLine `json:"logs,omitempty"`
	// Archived: retention moved the task to the archive; it is kept for the record only.
	Archived bool `json:"archived,omitempty"`
	// CancelledBy is who cancelled the task (or asked to) and when (Get only).
	CancelledBy *CancelledBy `json:"cancelled_by,omitempty"`
	// RejectedBreakdown counts an import's rejected rows by the field at fault and, under
	// each field, by reason, most first (Get only; empty when no row was rejected).
	RejectedBreakdown []FieldCount `json:"rejected_breakdown,omitempty"`
}

// FieldCount is how many rejected rows one field was at fault in; a row rejected for
// several fields counts under each.
type FieldCount struct {
	Field string `json:"field"`
	Count int64  `json:"count"`
	// Reasons count the field's rows by reason, most first.
	Reasons []ReasonCount `json:"reasons,omitempty"`
}

// ReasonCount is how many rejected rows one field was at fault in for one reason: a row
// message's catalogue code, with its params when every row of the group has the same. A
// message that names values, without its params, reads as the catalogue's "reason.<name>"
// ("row.duplicate": "reason.duplicate").
type ReasonCount struct {
	Code   string            `json:"code"`
	Params map[string]string `json:"params,omitempty"`
	Count  int64             `json:"count"`
	// Says is the reason as the message to say, in any language with the catalogue.
	Says struct {
		Code   string            `json:"code"`
		Params map[string]string `json:"params,omitempty"`
	} `json:"says"`
}

// CancelledBy is who cancelled a task and when, from the audit trail.
type CancelledBy struct {
	Actor string    `json:"actor"`
	At    time.Time `json:"at"`
}

// Terminal reports whether the task has ended.
func (t *Task) Terminal() bool { return t.Status.Terminal() }

// The parts of a task view.
type (
	// Progress is how far a running task is.
	Progress = task.Progress
	// Counts are the rows a task handled.
	Counts = task.Counts
	// TaskError is why a task (or its last attempt) failed.
	TaskError = task.ErrorView
	// Result describes a finished task's file and summary.
	Result = task.ResultView
	// Links are the actions available on a task now (API paths).
	Links = task.Links
)

// Attempt is one execution attempt.
type Attempt struct {
	Attempt int    `json:"attempt"`
	Trigger string `json:"trigger"`
	Worker  string `json:"worker"`
	Status  string `json:"status"`
	Error   string `json:"error"` // in English
	// ErrorCode and ErrorParams are Error as the message "error.<code>" of the product's
	// catalogue, to say it in another language.
	ErrorCode   string            `json:"error_code,omitempty"`
	ErrorParams map[string]string `json:"error_params,omitempty"`
	StartedAt   time.Time         `json:"started_at"`
	FinishedAt  *time.Time        `json:"finished_at"`
}

// LogLine is one line of a task's log.
type LogLine struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt"`
	Level   string    `json:"level"`
	Message string    `json:"message"` // in English
	// Code and Params are the line as a message of the product's catalogue, to say it in
	// another language; empty on lines written before codes were kept.
	Code   string            `json:"code,omitempty"`
	Params map[string]string `json:"params,omitempty"`
}

// Submitted is the answer to a submit.
type Submitted struct {
	Task Task `json:"task"`
	// Duplicate is true when the same submit was made before: Task is that first task.
	Duplicate bool `json:"duplicate"`
	// Webhook is the subscription a NotifyURL created; its Secret is shown only here.
	Webhook *Webhook `json:"webhook,omitempty"`
}

// SubmitOptions are what every submit may add.
type SubmitOptions struct {
	// IdempotencyKey makes a repeated submit return the first task (exports and generic
	// submits; an import is keyed by its file's content).
	IdempotencyKey string
	// NotifyURL is told when the task ends (a signed webhook, see VerifySignature).
	NotifyURL string
	// NotifySecret signs those deliveries; the server makes one (returned once) when empty.
	NotifySecret string
}

// Export is an export request.
type Export struct {
	// Type is "customers" or "tasks".
	Type string `json:"type"`
	// Filter narrows it: customers take city, level, code_prefix; tasks take status and type
	// (arrays), owner (admin), created_from, created_to, q (ListOptions.Search's search).
	Filter map[string]any `json:"filter,omitempty"`
}

// SubmitExport submits an export.
func (c *Client) SubmitExport(ctx context.Context, e Export, opts SubmitOptions) (*Submitted, error) {
	body := map[string]any{"type": e.Type}
	if len(e.Filter) > 0 {
		body["filter"] = e.Filter
	}
	return c.submitJSON(ctx, "/api/v1/exports", body, opts)
}

// Submit submits a task of a type without its own endpoint (POST /api/v1/tasks).
func (c *Client) Submit(ctx context.Context, taskType string, params any, opts SubmitOptions) (*Submitted, error) {
	body := map[string]any{"type": taskType}
	if params != nil {
		body["params"] = params
	}
	return c.submitJSON(ctx, "/api/v1/tasks", body, opts)
}

// submitJSON posts a submit's JSON body to path with what opts add to every submit.
func (c *Client) submitJSON(ctx context.Context, path string, body map[string]any, opts SubmitOptions) (*Submitted, error) {
	if opts.NotifyURL != "" {
		body["notify_url"] = opts.NotifyURL
	}
	if opts.NotifySecret != "" {
		body["notify_secret"] = opts.NotifySecret
	}
	return callFor[Submitted](ctx, c, http.MethodPost, path, nil, body, "Idempotency-Key", opts.IdempotencyKey)
}

// Import is an import's options.
type Import struct {
	// Mode is "upsert" (default), "insert" (a code already present is a row error) or
	// "replace" (upsert, then remove the customers the file does not hold, only when every
	// row was accepted).
	Mode string
	// Sheet is the sheet to read; default the first.
	Sheet string
	// Columns maps headers of the file to fields (header → "code", "name", "phone", "email",
	// "city" or "level"), for headers the import does not know; applied before the
	// built-in names.
	Columns map[string]string
	// DryRun runs every check and writes nothing: the task ends with the counts and error
	// report the real import would give.
	DryRun bool
}

// ImportResubmit imports the stored upload of an earlier import task again, without
// uploading it: the fields set replace that task's choices, the others are kept.
type ImportResubmit struct {
	// FromTask is the id of the earlier import task (one the caller can see).
	FromTask string
	// Columns, when not nil, replaces the column mapping (empty: none).
	Columns map[string]string
	// Mode, Sheet, Encoding and Lang replace the earlier task's when not empty.
	Mode, Sheet, Encoding, Lang string
	// DryRun, when not nil, replaces the earlier task's dry_run.
	DryRun *bool
}

// ResubmitImport imports an earlier import task's stored upload again with other choices
// (a column mapping, a real run after a dry one). An upload no longer kept is a Problem with
// Code "upload_missing" (410): upload the file again.
func (c *Client) ResubmitImport(ctx context.Context, r ImportResubmit, opts SubmitOptions) (*Submitted, error) {
	body := map[string]any{"from_task": r.FromTask}
	if r.Columns != nil {
		body["columns"] = r.Columns
	}
	for k, v := range map[string]string{"mode": r.Mode, "sheet": r.Sheet, "encoding": r.Encoding, "lang": r.Lang} {
		if v != "" {
			body[k] = v
		}
	}
	if r.DryRun != nil {
		body["dry_run"] = *r.DryRun
	}
	opts.IdempotencyKey = "" // a re-submit is deduplicated by what it imports
	return c.submitJSON(ctx, "/api/v1/imports", body, opts)
}

// ImportSummary is what an import did (or, dry, would do), from its result.
type ImportSummary = task.ImportSummary

// ImportSummaryOf reads a finished import's summary; false when the task has none.
func ImportSummaryOf(t *Task) (ImportSummary, bool) {
	var s ImportSummary
	if t.Result == nil || len(t.Result.Summary) == 0 || json.Unmarshal(t.Result.Summary, &s) != nil {
		return ImportSummary{}, false
	}
	return s, true
}

// SubmitImportFile uploads the spreadsheet at path (.xlsx or UTF-8 .csv), streamed from the
// file, never held in memory.
func (c *Client) SubmitImportFile(ctx context.Context, path string, imp Import, opts SubmitOptions) (*Submitted, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return c.SubmitImport(ctx, filepath.Base(path), f, imp, opts)
}

// SubmitImport uploads a spreadsheet read from r under the file name name (its extension
// tells the format), streamed as a multipart body.
func (c *Client) SubmitImport(ctx context.Context, name string, r io.Reader, imp Import, opts SubmitOptions) (*Submitted, error) {
	var columns, dryRun string
	if len(imp.Columns) > 0 {
		b, err := json.Marshal(imp.Columns)
		if err != nil {
			return nil, err
		}
		columns = string(b)
	}
	if imp.DryRun {
		dryRun = "true"
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			for _, f := range [][2]string{{"mode", imp.Mode}, {"sheet", imp.Sheet}, {"columns", columns}, {"dry_run", dryRun},
				{"notify_url", opts.NotifyURL}, {"notify_secret", opts.NotifySecret}} {
				if f[1] != "" {
					if err := mw.WriteField(f[0], f[1]); err != nil {
						return err
					}
				}
			}
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, quoteEscaper.Replace(name)))
			h.Set("Content-Type", "application/octet-stream")
			part, err := mw.CreatePart(h)
			if err != nil {
				return err
			}
			if _, err := io.Copy(part, r); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	req, err := c.request(ctx, http.MethodPost, "/api/v1/imports", nil, pr)
	if err != nil {
		pr.Close()
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	var out Submitted
	_, err = c.do(req, &out)
	pr.Close()
	if err != nil {
		return nil, err
	}
	return &out, nil
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"", "\r", "", "\n", "")

// Get returns a task with its attempts and recent log.
func (c *Client) Get(ctx context.Context, id string) (*Task, error) {
	return callFor[Task](ctx, c, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id), nil, nil)
}

// Cancel cancels a task: a waiting one at once, a running one at its next batch.
func (c *Client) Cancel(ctx context.Context, id string) (*Task, error) {
	return callFor[Task](ctx, c, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+"/cancel", nil, nil)
}

// Retry runs a FAILED, TIMEOUT or CANCELLED task again as a new attempt.
func (c *Client) Retry(ctx context.Context, id string) (*Task, error) {
	return callFor[Task](ctx, c, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+"/retry", nil, nil)
}

// Undo undoes a finished import: it returns the undo task (of type import:customers-undo),
// the one made before with Duplicate set when the import was already undone. What cannot be
// undone (an undo, a dry run, an import not finished, or one whose before-image has
// expired) is a *Problem saying why.
func (c *Client) Undo(ctx context.Context, id string) (*Submitted, error) {
	return callFor[Submitted](ctx, c, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+"/undo", nil, nil)
}

// BulkResult is what a bulk cancel or retry did to one task.
type BulkResult struct {
	ID string `json:"id"`
	// Outcome is BulkDone, BulkNotAllowed, BulkNotFound or BulkError.
	Outcome string `json:"outcome"`
	// Code, Params and Message are the problem the single action would have answered (not
	// done only): its code, the values its message names, and its English.
	Code    string            `json:"code,omitempty"`
	Params  map[string]string `json:"params,omitempty"`
	Message string            `json:"message,omitempty"`
	// Task is the task as the action left it (done only).
	Task *Task `json:"task,omitempty"`
}

// The outcomes of a bulk action for one task.
const (
	BulkDone       = "done"        // carried out
	BulkNotAllowed = "not_allowed" // the task's status or rules refuse it (Message says why)
	BulkNotFound   = "not_found"   // no such task is visible to you
	BulkError      = "error"       // the server could not act on it now; try that task again
)

// MaxBulk is how many tasks one bulk action may name.
const MaxBulk = 100

// CancelMany cancels up to MaxBulk tasks, each as Cancel would, and says what happened to
// each, in the order named (an id named twice is answered once). A task that cannot be
// cancelled is a result, not an error: the error is for a request refused as a whole.
func (c *Client) CancelMany(ctx context.Context, ids ...string) ([]BulkResult, error) {
	return c.bulk(ctx, "cancel", ids)
}

// RetryMany retries up to MaxBulk tasks, each as Retry would, and says what happened to
// each, in the order named (an id named twice is answered once).
func (c *Client) RetryMany(ctx context.Context, ids ...string) ([]BulkResult, error) {
	return c.bulk(ctx, "retry", ids)
}

func (c *Client) bulk(ctx context.Context, action string, ids []string) ([]BulkResult, error) {
	out, err := callFor[struct {
		Results []BulkResult `json:"results"`
	}](ctx, c, http.MethodPost, "/api/v1/tasks/"+action, nil, map[string]any{"ids": ids})
	if err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Sort is the order of a listing: a key on its own lists the largest first, with a leading
// "-" the smallest first.
type Sort string

// The sorts of a listing.
const (
	SortNewest       Sort = "created"   // newest first (the server's default)
	SortOldest       Sort = "-created"  // oldest first
	SortLongest      Sort = "duration"  // the longest run first; tasks without one last
	SortShortest     Sort = "-duration" // the shortest run first; tasks without one last
	SortMostFailed   Sort = "failed"    // the most rejected rows first
	SortFewestFailed Sort = "-failed"   // the fewest rejected rows first
)

// ListOptions filter a listing.
type ListOptions struct {
	// Search finds tasks by the start of their id, or any part of their title or of an
	// import's file name, in either case (% and _ are themselves).
	Search      string
	Status      []string
	Type        []string
	Owner       string // admins only
	CreatedFrom time.Time
	CreatedTo   time.Time
	// Sort orders the listing; "" is the server's default, newest first.
	Sort Sort
	// PageSize is how many tasks one request fetches (1–200; server default when 0).
	PageSize int
}

func (o ListOptions) query(cursor string) url.Values {
	q := url.Values{}
	if o.Search != "" {
		q.Set("q", o.Search)
	}
	if o.Sort != "" {
		q.Set("sort", string(o.Sort))
	}
	if len(o.Status) > 0 {
		q.Set("status", strings.Join(o.Status, ","))
	}
	if len(o.Type) > 0 {
		q.Set("type", strings.Join(o.Type, ","))
	}
	if o.Owner != "" {
		q.Set("owner", o.Owner)
	}
	if !o.CreatedFrom.IsZero() {
		q.Set("created_from", o.CreatedFrom.UTC().Format(time.RFC3339))
	}
	if !o.CreatedTo.IsZero() {
		q.Set("created_to", o.CreatedTo.UTC().Format(time.RFC3339))
	}
	if o.PageSize > 0 {
		q.Set("limit", strconv.Itoa(o.PageSize))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}

// Page is one page of a listing.
type Page struct {
	Items      []Task `json:"items"`
	NextCursor string `json:"next_cursor"`
	// Total is how many tasks the options select, on all pages.
	Total int64 `json:"total"`
	// Counts is how many tasks each status has among those every option but Status selects.
	Counts map[Status]int64 `json:"counts"`
}

// ListPage returns one page of tasks in the options' order; pass the previous page's
// NextCursor for the next ("" for the first), with the same options.
func (c *Client) ListPage(ctx context.Context, opts ListOptions, cursor string) (*Page, error) {
	return callFor[Page](ctx, c, http.MethodGet, "/api/v1/tasks", opts.query(cursor), nil)
}

// List iterates over every matching task in the options' order, fetching pages as it goes.
// An error ends the iteration.
func (c *Client) List(ctx context.Context, opts ListOptions) iter.Seq2[*Task, error] {
	return func(yield func(*Task, error) bool) {
		cursor := ""
		for {
			p, err := c.ListPage(ctx, opts, cursor)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range p.Items {
				if !yield(&p.Items[i], nil) {
					return
				}
			}
			if p.NextCursor == "" || len(p.Items) == 0 {
				return
			}
			cursor = p.NextCursor
		}
	}
}
